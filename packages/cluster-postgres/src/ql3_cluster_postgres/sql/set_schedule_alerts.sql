-- ScheduleAdmin (add and apply): what each schedule asks to be alerted about and how, written by
-- ql3.admin_set_alerts_v1 (migration 0013) in the transaction that writes its definition.
SELECT ql3.admin_set_alerts_v1(
    %(schedule_id)s::bigint, %(alert_on)s::text[], %(command)s::text, %(webhook)s::text,
    %(deadline_ms)s::bigint
) AS done
