-- ScheduleAdmin.backfill (plan): the schedule a backfill is asked for, by name, with what bounds
-- the occurrences it may admit (cursor, window, state) and the database clock of the plan.
SELECT s.id, k.name, s.state, s.timezone, s.next_due_at_ms, s.start_at_ms, s.end_at_ms,
       floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
FROM ql3.trigger_schedules AS s
JOIN ql3.tasks AS k ON k.id = s.task_id
WHERE k.name = %(name)s::text
