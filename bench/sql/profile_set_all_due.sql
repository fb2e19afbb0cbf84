-- Bench setup only, run as the database superuser: every active cursor one minute boundary back
-- by the database clock, so all schedules are due at once when the plans are taken.
UPDATE ql3.trigger_schedules
SET next_due_at_ms = (floor(extract(epoch FROM clock_timestamp()) / 60) * 60 - 60)::bigint * 1000
WHERE state = 'active'
