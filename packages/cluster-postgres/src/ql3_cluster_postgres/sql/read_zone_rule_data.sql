-- The TZif bytes of some zones of one zone rules version (a zone the version lacks is absent).
SELECT d.zone, d.tzif
FROM ql3.zone_rule_data AS d
WHERE d.version = %(version)s
  AND d.zone = ANY (%(zones)s::text[])
