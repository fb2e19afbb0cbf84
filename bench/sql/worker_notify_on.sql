-- Bench (worker), as the superuser: migration 0015's notification trigger back on.
ALTER TABLE ql3.attempts ENABLE TRIGGER attempts_notify_queued
