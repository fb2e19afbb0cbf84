-- HistoryReader.alert_counts (metrics `ql3_alerts_total{kind}` and
-- `ql3_alert_delivery_failures_total`): alerts recorded by kind, failed delivery attempts.
SELECT k.kind,
       (SELECT count(*) FROM ql3.alerts AS a WHERE a.kind = k.kind) AS alerts,
       (SELECT count(*) FROM ql3.alert_deliveries AS d
        JOIN ql3.alerts AS a ON a.id = d.alert_id
        WHERE a.kind = k.kind AND d.outcome = 'failed') AS delivery_failures
FROM unnest(ARRAY['missed', 'late', 'failed', 'paused']::text[]) AS k (kind)
