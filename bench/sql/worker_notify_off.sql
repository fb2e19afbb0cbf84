-- Bench (worker), as the superuser: migration 0015's notification trigger off, to measure what
-- it costs an admitting transaction (worker_notify_on.sql turns it back on).
ALTER TABLE ql3.attempts DISABLE TRIGGER attempts_notify_queued
