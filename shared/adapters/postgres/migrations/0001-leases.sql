-- leases

CREATE TABLE leases (
  name        text PRIMARY KEY,
  holder      text,
  epoch       bigint NOT NULL CHECK (epoch >= 0),
  version     bigint NOT NULL CHECK (version >= 0),
  acquired_at timestamptz NOT NULL,
  renewed_at  timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  hostname    text,
  api_url     text
);
COMMENT ON TABLE leases IS 'Lease rows are never deleted: deleting one resets its epoch and breaks fencing.';
