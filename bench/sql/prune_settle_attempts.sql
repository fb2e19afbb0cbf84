-- Bench setup only (prune), as the superuser: the synthetic history's attempts end succeeded at
-- their admission time, as a settled history's have (a queued attempt is live: never pruned).
UPDATE ql3.attempts SET state = 'succeeded', finished_at_ms = updated_at_ms WHERE state = 'queued'
