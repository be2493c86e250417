-- One table or index per problem `rekey lint` finds in a schema.

-- timestamp-first-key, and timestamp-key-without-desc (LastAccess is ASC)
CREATE TABLE UserAccessLogs (
  LastAccess TIMESTAMP NOT NULL,
  UserId STRING(36) NOT NULL,
  Page STRING(MAX),
) PRIMARY KEY(LastAccess, UserId);

-- monotonic-key: an INT64 named like a sequence
CREATE TABLE Orders (
  OrderSeq INT64 NOT NULL,
  CustomerId STRING(36) NOT NULL,
  PlacedAt TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY(OrderSeq);

-- monotonic-index: not interleaved, led by a commit timestamp
CREATE INDEX OrdersByPlacedAt ON Orders(PlacedAt);

-- shards-far-above-nodes with --nodes 3 (100 shards), and a timestamp key
-- column declared DESC (no finding for it)
CREATE TABLE Events (
  ShardId INT64 NOT NULL AS (MOD(FARM_FINGERPRINT(DeviceId), 100)) STORED,
  DeviceId STRING(64) NOT NULL,
  EventTime TIMESTAMP NOT NULL,
) PRIMARY KEY(ShardId, DeviceId, EventTime DESC);

-- shards-far-above-nodes from a CHECK on a ShardId column
CREATE TABLE Readings (
  ShardId INT64 NOT NULL,
  SensorId STRING(64) NOT NULL,
  CONSTRAINT ShardRange CHECK (ShardId >= 0 AND ShardId < 64),
) PRIMARY KEY(ShardId, SensorId);

-- many-key-columns and long-key (4 × STRING(1024) = 4,096)
CREATE TABLE Addresses (
  Country STRING(1024) NOT NULL,
  Region STRING(1024) NOT NULL,
  City STRING(1024) NOT NULL,
  Street STRING(1024) NOT NULL,
) PRIMARY KEY(Country, Region, City, Street);

-- long-key (info): STRING(MAX) key column; uuid-v1: the name says so
CREATE TABLE Sessions (
  SessionTimeUuid STRING(MAX) NOT NULL,
) PRIMARY KEY(SessionTimeUuid);

-- An interleaved child: its first key column is its parent's (no second
-- finding for it), its index is interleaved (no monotonic-index).
CREATE TABLE OrderLines (
  OrderSeq INT64 NOT NULL,
  LineNo INT64 NOT NULL,
  Created TIMESTAMP NOT NULL,
) PRIMARY KEY(OrderSeq, LineNo),
  INTERLEAVE IN PARENT Orders ON DELETE CASCADE;

CREATE INDEX OrderLinesByCreated ON OrderLines(OrderSeq, Created), INTERLEAVE IN Orders;
