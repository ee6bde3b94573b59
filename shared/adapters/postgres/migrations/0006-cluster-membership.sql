-- cluster membership
-- Cluster membership, as Orchestry's distributed controller keeps it. Leadership is the lease row (leases), so its leader_lease table is not created.

CREATE TABLE cluster_nodes (
  node_id        varchar(255) PRIMARY KEY,
  hostname       varchar(255) NOT NULL,
  port           integer NOT NULL,
  api_url        varchar(512) NOT NULL,
  state          varchar(50) NOT NULL CHECK (state IN ('follower', 'candidate', 'leader', 'stopped')),
  term           integer NOT NULL DEFAULT 0,
  last_heartbeat timestamptz NOT NULL DEFAULT now(),
  is_healthy     boolean NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE cluster_events (
  id         serial PRIMARY KEY,
  node_id    varchar(255) NOT NULL,
  event_type varchar(100) NOT NULL,
  event_data jsonb,
  timestamp  timestamptz NOT NULL DEFAULT now()
);
