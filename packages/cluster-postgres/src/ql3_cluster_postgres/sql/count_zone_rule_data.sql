-- How many zones the database stores for a zone rules version (0: its rules are not known).
SELECT count(*) AS zones
FROM ql3.zone_rule_data AS d
WHERE d.version = %(version)s
