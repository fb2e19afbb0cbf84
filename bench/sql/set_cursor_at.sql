-- Bench setup only, run as the database superuser: every active cursor to one instant (`at_ms`,
-- an occurrence of every schedule's cron), so all of them fall due together (the burst).
UPDATE ql3.trigger_schedules
SET next_due_at_ms = %(at_ms)s
WHERE state = 'active'
