-- The table of the bundled access-log sample (user_access_logs.jsonl),
-- keyed as an application that logs in time order would key it.
-- rekey emulators up -c FILE --ddl configs/samples/user_access_logs.sql
-- creates it in the config's Spanner database.
CREATE TABLE UserAccessLogs (
  LastAccess TIMESTAMP NOT NULL,
  UserId STRING(36) NOT NULL,
  Page STRING(MAX),
  Bytes INT64,
) PRIMARY KEY (LastAccess, UserId);

CREATE INDEX UserAccessLogsByPage ON UserAccessLogs (Page);
