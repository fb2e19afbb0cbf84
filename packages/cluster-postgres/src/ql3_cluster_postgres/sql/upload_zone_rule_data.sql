-- Store a zone rules version's data (every zone's TZif bytes), once: rows already stored stay.
-- `differing` counts zones stored before under this version with other bytes than the ones sent,
-- which the caller refuses (a version's name must mean one set of rules).
WITH input AS (
    SELECT *
    FROM unnest(%(zones)s::text[], %(tzifs)s::bytea[]) AS i (zone, tzif)
),
stored AS (
    INSERT INTO ql3.zone_rule_data (version, zone, tzif)
    SELECT %(version)s, i.zone, i.tzif
    FROM input AS i
    ON CONFLICT (version, zone) DO NOTHING
    RETURNING zone
)
SELECT
    (SELECT count(*) FROM stored) AS stored,
    (SELECT count(*)
     FROM input AS i
     JOIN ql3.zone_rule_data AS d ON d.version = %(version)s AND d.zone = i.zone
     WHERE d.tzif <> i.tzif) AS differing
