-- Bench setup only (prune), as the superuser: the cursor and commit time after an hour of rows,
-- as the Coordinator's commits would have left them.
UPDATE ql3.trigger_schedules
SET next_due_at_ms = %(cursor_ms)s, updated_at_ms = %(cursor_ms)s
WHERE id = ANY (%(ids)s::bigint[])
