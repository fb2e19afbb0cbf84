-- Server processes serving a login user (the replicas' or baseline workers' backends).
SELECT pid FROM pg_stat_activity WHERE usename = %(user)s AND backend_type = 'client backend'
