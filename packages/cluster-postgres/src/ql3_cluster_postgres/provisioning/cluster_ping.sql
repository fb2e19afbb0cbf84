-- PrivateServer start-up: ready means a real login and statement succeed, not just a listening
-- port (the postmaster listens before recovery ends and refuses logins until then).
SELECT 1 AS ready
