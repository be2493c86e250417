CREATE TABLE Singers (
  SingerId INT64 NOT NULL,
  FirstName STRING(1024),
  LastName STRING(1024),
  SingerInfo BYTES(MAX),
  FullName STRING(2048) AS (ARRAY_TO_STRING([FirstName, LastName], " ")) STORED,
  Tags ARRAY<STRING(MAX)>,
  Updated TIMESTAMP OPTIONS (
    allow_commit_timestamp = true
  ),
  Score FLOAT64 DEFAULT (0.0),
) PRIMARY KEY(SingerId);

CREATE INDEX SingersByFirstLastName ON Singers(FirstName, LastName);

CREATE TABLE Albums (
  SingerId INT64 NOT NULL,
  AlbumId INT64 NOT NULL,
  AlbumTitle STRING(MAX),
  CONSTRAINT FK_Title FOREIGN KEY (AlbumTitle) REFERENCES Titles (Title),
) PRIMARY KEY(SingerId, AlbumId DESC),
  INTERLEAVE IN PARENT Singers ON DELETE CASCADE;

CREATE TABLE `Order` (
  Id STRING(36) NOT NULL,
) PRIMARY KEY(Id);
