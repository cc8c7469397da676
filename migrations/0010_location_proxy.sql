-- The proxy of a private location's API checks (`proxyUrl` of the public API): the
-- normalized URL, password included (agents need it; answers show it masked), or NULL
-- for none. Handed to agents with each job they lease for the location, so a change
-- applies to jobs leased after it.

ALTER TABLE private_locations ADD COLUMN proxy_url TEXT;
