-- cscp._http_segment (the gateway's Location headers) percent-encodes in time linear in its
-- input: make fuzz found a megabyte taking minutes, past the statement timeout, in the loop it
-- had.  What it writes is unchanged.  The timeout is a bound, not a timing: the linear
-- function takes about 1 s on an idle machine and 6 s on a loaded one, the quadratic loop minutes.
BEGIN;
SELECT plan(4);
SELECT is(cscp._http_segment('conv-1.a_b~c'), 'conv-1.a_b~c', 'an unreserved segment is kept');
SELECT is(cscp._http_segment('a b/é:%'), 'a%20b%2F%C3%A9%3A%25', 'other bytes are percent-encoded, UTF-8 first');
SET LOCAL statement_timeout = '60s';
SELECT is(pg_catalog.length(cscp._http_segment(pg_catalog.repeat('é', 300000))), 1800000,
          '600 kB of two-byte characters in linear time (well within a minute)');
SELECT is(pg_catalog.md5(cscp._http_segment(pg_catalog.repeat('é', 300000))),
          pg_catalog.md5(pg_catalog.repeat('%C3%A9', 300000)), '... encoded byte by byte');
SELECT * FROM finish();
ROLLBACK;
