-- What the pg_regress tests that file uploads by hand share (docs/protocol.md,
-- section 7): protobuf written and read field by field, a message's seal read
-- from its head, an upload framed with its length first and its check last.  A test
-- reads it into its own database with
--   \getenv abs_srcdir PG_ABS_SRCDIR
--   \i :abs_srcdir/sql/include/wire.sql
CREATE SCHEMA wire;
GRANT USAGE ON SCHEMA wire TO PUBLIC;
-- a varint; a negative number as its 64 bits (two's complement), as protobuf writes an int64
CREATE FUNCTION wire.varint(n bigint) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	b bytea := '\x';
	u numeric := CASE WHEN n < 0 THEN n + 18446744073709551616 ELSE n END;
BEGIN
	IF u IS NULL THEN
		RAISE EXCEPTION 'no number to write';
	END IF;
	LOOP
		IF u < 128 THEN
			RETURN b || set_byte('\x00'::bytea, 0, u::int);
		END IF;
		b := b || set_byte('\x00'::bytea, 0, (u % 128)::int + 128);
		u := floor(u / 128);
	END LOOP;
END $$;
-- a varint field, written even when 0
CREATE FUNCTION wire.pb_int(field int, n bigint) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.varint(field * 8) || wire.varint(n)
$$;
CREATE FUNCTION wire.pb_bytes(field int, b bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.varint(field * 8 + 2) || wire.varint(length(b)) || b
$$;
CREATE FUNCTION wire.pb_text(field int, s text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.pb_bytes(field, convert_to(s, 'UTF8'))
$$;
-- a key: its parts as text, each a field 1
CREATE FUNCTION wire.pb_key(field int, parts jsonb) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.pb_bytes(field, coalesce(string_agg(wire.pb_text(1, p), '\x'::bytea ORDER BY o), '\x'))
	  FROM jsonb_array_elements_text(parts) WITH ORDINALITY AS x(p, o)
$$;
-- the payload of field `want` of a protobuf message, NULL when absent: a
-- length-delimited field's bytes, a varint's value as 8 bytes big endian (as
-- an int64: 2^63 and over are negative), a fixed64's 8 bytes as written
CREATE FUNCTION wire.field(m bytea, want int) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	pos int := 0;
	tag bigint;
	v numeric;
	shift int;
	b int;
BEGIN
	WHILE pos < length(m) LOOP
		tag := 0; shift := 0;
		LOOP
			b := get_byte(m, pos); pos := pos + 1;
			tag := tag + ((b & 127)::bigint << shift); shift := shift + 7;
			EXIT WHEN b < 128;
		END LOOP;
		IF tag & 7 = 1 THEN
			IF tag >> 3 = want THEN
				RETURN substring(m FROM pos + 1 FOR 8);
			END IF;
			pos := pos + 8;
			CONTINUE;
		END IF;
		v := 0; shift := 0;
		LOOP
			b := get_byte(m, pos); pos := pos + 1;
			v := v + (b & 127) * 2::numeric ^ shift; shift := shift + 7;
			EXIT WHEN b < 128;
		END LOOP;
		IF tag & 7 = 0 THEN
			IF tag >> 3 = want THEN
				RETURN int8send(CASE WHEN v >= 9223372036854775808 THEN v - 18446744073709551616 ELSE v END::bigint);
			END IF;
		ELSE
			IF tag >> 3 = want THEN
				RETURN substring(m FROM pos + 1 FOR v::int);
			END IF;
			pos := pos + v::int;
		END IF;
	END LOOP;
	RETURN NULL;
END $$;
-- a varint field's value; 0 when absent (as protobuf reads it)
CREATE FUNCTION wire.int_field(m bytea, want int) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
	SELECT coalesce(('x' || encode(wire.field(m, want), 'hex'))::bit(64)::bigint, 0)
$$;
-- the seal of a message, read from its head (field 7 of ToReplica)
CREATE FUNCTION wire.seal(head bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT wire.field(head, 7)
$$;
-- an upload's fields with its length first (field 12, fixed64) and its check last
-- (field 13: SHA-256 of every byte before it)
CREATE FUNCTION wire.framed(m bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	len bytea := '\x0000000000000000';
	total bigint := 9 + length(m) + 34;
	head bytea;
BEGIN
	FOR i IN 0..7 LOOP
		len := set_byte(len, i, ((total >> (8 * i)) & 255)::int);
	END LOOP;
	head := '\x61' || len || m;
	RETURN head || '\x6a20'::bytea || sha256(head);
END $$;
