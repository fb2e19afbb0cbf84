-- ScheduleAdmin (add and apply): what each schedule asks to be alerted about and how, written by
-- ql3.admin_set_alerts_v1 (migration 0013) in the transaction that writes its definition, in one
-- statement for every spec. A schedule that asks for nothing and asked for nothing is left alone
-- (applying a large file without alerts costs no call per schedule). Kinds are comma-joined.
SELECT count(ql3.admin_set_alerts_v1(
           i.schedule_id, string_to_array(nullif(i.alert_on, ''), ','), i.command, i.webhook,
           i.deadline_ms
       )) AS written
FROM unnest(
    %(schedule_ids)s::bigint[], %(alert_ons)s::text[], %(commands)s::text[],
    %(webhooks)s::text[], %(deadlines)s::bigint[]
) AS i (schedule_id, alert_on, command, webhook, deadline_ms)
JOIN ql3.trigger_schedules AS s ON s.id = i.schedule_id
WHERE i.alert_on <> '' OR i.command IS NOT NULL OR i.webhook IS NOT NULL
   OR i.deadline_ms IS NOT NULL OR s.alert_on <> '{}' OR s.alert_command IS NOT NULL
   OR s.alert_webhook IS NOT NULL OR s.alert_deadline_ms IS NOT NULL
