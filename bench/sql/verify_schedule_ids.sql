-- Bench setup only (verify): the schedule ids of the given task names, in the names' order.
SELECT s.id AS schedule_id
FROM unnest(%(names)s::text[]) WITH ORDINALITY AS n (name, position)
JOIN ql3.tasks AS t ON t.name = n.name
JOIN ql3.trigger_schedules AS s ON s.task_id = t.id
ORDER BY n.position
