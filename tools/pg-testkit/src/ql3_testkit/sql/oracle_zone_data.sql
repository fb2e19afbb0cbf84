-- The TZif bytes of one zone under one recorded zone rules version (DESIGN §9), if stored.
SELECT d.tzif
FROM ql3.zone_rule_data AS d
WHERE d.version = %(version)s AND d.zone = %(zone)s
