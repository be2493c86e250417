-- Keys that spread: no findings.
CREATE SEQUENCE CustomerSeq OPTIONS (sequence_kind = 'bit_reversed_positive');

CREATE TABLE Customers (
  CustomerId INT64 NOT NULL DEFAULT (GET_NEXT_SEQUENCE_VALUE(SEQUENCE CustomerSeq)),
  Name STRING(MAX),
  Created TIMESTAMP OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY(CustomerId);

CREATE TABLE Visits (
  VisitId STRING(36) NOT NULL DEFAULT (GENERATE_UUID()),
  CustomerId INT64 NOT NULL,
  EventTime TIMESTAMP NOT NULL,
) PRIMARY KEY(VisitId);

CREATE TABLE Events (
  ShardId INT64 NOT NULL AS (MOD(FARM_FINGERPRINT(DeviceId), 10)) STORED,
  DeviceId STRING(64) NOT NULL,
  EventTime TIMESTAMP NOT NULL,
) PRIMARY KEY(ShardId, DeviceId, EventTime DESC);

CREATE INDEX VisitsByCustomer ON Visits(CustomerId, EventTime DESC);
CREATE INDEX EventsByShardAt ON Events(ShardId, EventTime);
