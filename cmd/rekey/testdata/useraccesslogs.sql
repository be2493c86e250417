-- gcloud spanner databases ddl describe demo --instance rekey
CREATE TABLE UserAccessLogs (
  LastAccess TIMESTAMP NOT NULL,
  UserId STRING(MAX) NOT NULL,
  Page STRING(MAX),
  Bytes INT64,
) PRIMARY KEY(LastAccess, UserId);

CREATE INDEX LogsByUser ON UserAccessLogs(UserId);
