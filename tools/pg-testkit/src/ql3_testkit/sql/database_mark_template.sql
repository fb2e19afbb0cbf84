-- A template must have no sessions while it is cloned; refusing connections keeps autovacuum and
-- stray clients out.
ALTER DATABASE {name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false
