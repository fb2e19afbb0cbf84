-- Bench setup only (prune), as the superuser: one attempt of at most a minute, no backoff, so the
-- refusal bound (longest lease + grace + retry span) is minutes, not the default three hours.
UPDATE ql3.tasks SET max_attempts = 1, timeout_ms = 60000, retry_backoff_ms = 0
