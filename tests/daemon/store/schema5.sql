-- A state database as the berth daemon of commit e933aff (schema 5) wrote it: two jobs
-- (one COMPLETED, one PENDING and held), a usage row; environments trimmed to three
-- variables. Made by running that daemon, submitting, stopping it, then .dump.
PRAGMA user_version=5;
BEGIN TRANSACTION;
CREATE TABLE jobs(
        id INTEGER PRIMARY KEY,
        uid INTEGER NOT NULL,
        user TEXT NOT NULL,
        state TEXT NOT NULL,
        submitted_at REAL NOT NULL,
        ended_at REAL,
        launched INTEGER NOT NULL DEFAULT 0,
        sup_pid INTEGER,
        data TEXT NOT NULL,
        spec TEXT NOT NULL
    , unique_key TEXT);
INSERT INTO "jobs" VALUES(1,0,'root','COMPLETED',1.79586977174566483493e+09,1.79586977176052689552e+09,0,NULL,'{"id":1,"name":"done-job","user":"root","uid":0,"gid":0,"tenant":"root","submit_time":1795869771.7456648,"priority":0,"request":{"gpus":1,"mem":null,"gpu_ids":null,"prefer":[],"name":null,"cpu":null,"ram":null},"time_limit":null,"dependencies":[],"retries":0,"retry_delay":10.0,"requeue":false,"held":false,"state":"COMPLETED","queue_time":1795869771.7456648,"not_before":null,"attempts":[{"number":1,"start":1795869771.745777,"gpus":[0],"share":1.0,"mem":null,"node":"","end":1795869771.760527,"outcome":"COMPLETED","exit_code":0,"reason":""}],"history":[{"at":1795869771.7456648,"prev":null,"state":"PENDING","detail":"submitted"},{"at":1795869771.745777,"prev":"PENDING","state":"RUNNING","detail":"on GPU 0"},{"at":1795869771.760527,"prev":"RUNNING","state":"COMPLETED","detail":"exit 0"}],"extra":{"lease":"02c301e576e0"},"group":"","group_limit":0}','{"argv":["true"],"env":{"PATH":"/usr/bin:/bin","HOME":"/root","LANG":"C.UTF-8"},"cwd":"/tmp","name":"done-job","umask":18,"stdout_path":"/tmp/s5/st/logs/root/1.out","stderr_path":"/tmp/s5/st/logs/root/1.out","pty_dir":"/tmp/s5/st/logs/root"}',NULL);
INSERT INTO "jobs" VALUES(2,0,'root','PENDING',1.79586977181695437431e+09,NULL,0,NULL,'{"id":2,"name":"waiting","user":"root","uid":0,"gid":0,"tenant":"root","submit_time":1795869771.8169544,"priority":0,"request":{"gpus":2,"mem":null,"gpu_ids":null,"prefer":[],"name":null,"cpu":null,"ram":null},"time_limit":null,"dependencies":[],"retries":0,"retry_delay":10.0,"requeue":false,"held":true,"state":"PENDING","queue_time":1795869771.8169544,"not_before":null,"attempts":[],"history":[{"at":1795869771.8169544,"prev":null,"state":"PENDING","detail":"submitted"}],"extra":{},"group":"","group_limit":0}','{"argv":["sleep","100"],"env":{"PATH":"/usr/bin:/bin","HOME":"/root","LANG":"C.UTF-8"},"cwd":"/tmp","name":"waiting","gpus":2,"hold":true,"umask":18,"stdout_path":"/tmp/s5/st/logs/root/2.out","stderr_path":"/tmp/s5/st/logs/root/2.out","pty_dir":"/tmp/s5/st/logs/root"}',NULL);
CREATE TABLE limits(
        user TEXT PRIMARY KEY,
        max_gpus REAL,
        max_jobs INTEGER,
        max_time REAL,
        shares REAL
    );
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO "meta" VALUES('boot_id','0d40a296-078e-4b1a-a99c-cd340442ae8d');
INSERT INTO "meta" VALUES('running','0');
CREATE TABLE paused(gpu TEXT PRIMARY KEY, since REAL NOT NULL, by_user TEXT, note TEXT);
CREATE TABLE quarantine(
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        reason TEXT NOT NULL,
        state TEXT,
        data TEXT,
        spec TEXT
    );
CREATE TABLE samples(at REAL PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE usage(tenant TEXT PRIMARY KEY, value REAL NOT NULL, as_of REAL NOT NULL);
INSERT INTO "usage" VALUES('root',1.47500036479443590031e-02,1.79586977176301622392e+09);
CREATE INDEX jobs_unfinished ON jobs(state)
        WHERE state IN ('PENDING', 'RUNNING', 'COMPLETING');
CREATE INDEX jobs_ended ON jobs(ended_at);
CREATE INDEX jobs_unique ON jobs(unique_key) WHERE unique_key IS NOT NULL;
COMMIT;
