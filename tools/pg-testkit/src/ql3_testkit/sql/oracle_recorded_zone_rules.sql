-- The zone rules version recorded now (DESIGN §9): what a revision that names none was judged by.
SELECT z.version
FROM ql3.zone_rules AS z
