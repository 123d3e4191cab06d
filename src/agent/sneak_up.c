/*-------------------------------------------------------------------------
 * sneak_up.c
 *	  Sneakernet, the replica's side: a bundle to the replica applied, each
 *	  message in a sync_apply of its own as the online agent applies them,
 *	  and what the replica has to say written into an upload bundle.
 *
 * Before anything is applied, every message of the bundle is checked
 * against the server key the replica trusts (sync_verify; --server-key pins
 * one, and a file that trusts none takes no bundle: exit 78): one the
 * server did not sign has the bundle refused whole as forged (exit 65).
 * Then the bundle is judged against what the replica
 * applied (sync_applied()), with the rules of the chain (docs/protocol.md
 * 5.1): a bundle whose messages were all applied before was imported
 * already; one whose first new message neither begins a snapshot nor
 * follows the last applied comes out of order -- handed to sync_apply it
 * would open a gap, and the server would provision the replica again for
 * a file that only came late.  Either is refused whole, answers included:
 * nothing of it is applied, and the command says why (exit 65); with --to
 * the replica's upload is written all the same, since what it applied and
 * wrote must reach the server whatever came by the last bundle.  A bundle
 * of answers only is applied: an answer applied again lets go of nothing
 * more.
 *-------------------------------------------------------------------------
 */
#include "sneakernet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

/* the most uploads one upload bundle carries: the rest wait for the next trip */
#define UPLOADS_MAX 1000

typedef enum verdict
{
	VERDICT_APPLY,
	VERDICT_APPLIED_ALREADY,
	VERDICT_OUT_OF_ORDER,
	VERDICT_WRONG_REPLICA,
	VERDICT_FORGED
} verdict;

static bool
same16(const ProtobufCBinaryData *a, const ProtobufCBinaryData *b)
{
	return a->len == 16 && b->len == 16 && memcmp(a->data, b->data, 16) == 0;
}

/*
 * judge: whether applying the bundle would do anything but open a gap;
 * the replica's Applied (NULL: it applied nothing) against each chained
 * message in turn, up to the first it lacks
 */
static verdict
judge(const ms_bundle *bundle, const Sync__Applied *a, size_t bound, sneak_result *r)
{
	ms_bundle	b = *bundle;
	const uint8_t *msg;
	size_t		len;
	verdict		v = VERDICT_APPLY;
	uint64_t	applied = a ? a->number : 0;

	while (ms_bundle_next(&b, &msg, &len))
	{
		ms_wire_status st;
		char		reason[MS_REASON_MAX];
		Sync__ToReplica *m = ms_to_replica_decode(msg, len, bound, NULL, &st, reason);
		bool		begins,
					follows;

		/*
		 * what does not decode (or is of a later protocol) sync_apply
		 * refuses, saying why and changing nothing: the messages before it
		 * apply, as the online agent's would
		 */
		if (m == NULL || st != MS_WIRE_OK)
		{
			if (m)
				sync__to_replica__free_unpacked(m, NULL);
			return VERDICT_APPLY;
		}
		if (m->replica.len != 16 || memcmp(m->replica.data, bundle->replica, 16) != 0)
		{
			sync__to_replica__free_unpacked(m, NULL);
			snprintf(r->reason, sizeof r->reason, "a message in it is sealed for another replica than the"
					 " bundle's %s", r->replica);
			return VERDICT_WRONG_REPLICA;
		}
		if (m->body_case == SYNC__TO_REPLICA__BODY_FILED)
		{
			sync__to_replica__free_unpacked(m, NULL);
			continue;
		}
		if (r->first == 0)
			r->first = (int64_t) m->number;
		r->last = (int64_t) m->number;
		if (a && same16(&m->epoch, &a->epoch) &&
			(m->generation < a->generation || (m->generation == a->generation && m->number <= applied)))
		{
			/* applied before, or of a generation the replica left behind */
			sync__to_replica__free_unpacked(m, NULL);
			v = VERDICT_APPLIED_ALREADY;
			continue;
		}
		begins = m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->begin != NULL;
		follows = a && same16(&m->epoch, &a->epoch) && m->previous == applied &&
			m->previous_nonce.len == a->nonce.len &&
			memcmp(m->previous_nonce.data, a->nonce.data, a->nonce.len) == 0;
		if (!begins && !follows && applied == 0)
			snprintf(r->reason, sizeof r->reason,
					 "its first message the replica lacks is %llu, but the replica applied nothing yet: import"
					 " the bundle that carries its snapshot first, or export a new one (nothing changed)",
					 (unsigned long long) m->number);
		else if (!begins && !follows)
			snprintf(r->reason, sizeof r->reason,
					 "its first message the replica lacks is %llu, which follows %llu, but the replica applied"
					 " through %llu%s: import the bundle that carries %llu first, or export a new one (nothing"
					 " changed)", (unsigned long long) m->number, (unsigned long long) m->previous,
					 (unsigned long long) applied, a && !same16(&m->epoch, &a->epoch) ? " of another epoch" : "",
					 (unsigned long long) applied + 1);
		sync__to_replica__free_unpacked(m, NULL);
		return begins || follows ? VERDICT_APPLY : VERDICT_OUT_OF_ORDER;
	}
	if (v == VERDICT_APPLIED_ALREADY)
		snprintf(r->reason, sizeof r->reason,
				 "its messages %lld..%lld were applied before (the replica applied through %llu): it was imported"
				 " already; nothing changed", (long long) r->first, (long long) r->last,
				 (unsigned long long) applied);
	return v;
}

/*
 * trusted: the server key the replica checks the bundle with: --server-key
 * pinned (in place of any other: the operator says so), or the one the file
 * trusts.  0, or EXIT_CONFIG when it trusts none: a bundle is never how a
 * replica learns the key, since whoever made the bundle could have made
 * the key too.
 */
static int
trusted(const sneak_options *o, replica *rep, sneak_result *r)
{
	uint8_t		key[32],
				pinned[32];
	bool		has = false;
	char		err[AGENT_ERROR_MAX];

	if (replica_trusted(rep, pinned, &has, err) != STEP_OK)
	{
		r->result = "unreadable";
		snprintf(r->reason, sizeof r->reason, "%s", err);
		return EXIT_NOINPUT;
	}
	if (o->server_key)
	{
		agent_key_parse(o->server_key, key);
		if ((!has || memcmp(key, pinned, 32) != 0) && replica_trust(rep, key, true, err) != STEP_OK)
		{
			r->result = "unreadable";
			snprintf(r->reason, sizeof r->reason, "%s", err);
			return EXIT_NOINPUT;
		}
		return 0;
	}
	if (has)
		return 0;
	r->result = "untrusted";
	snprintf(r->reason, sizeof r->reason, "the replica trusts no server key, so nothing in the bundle can be told"
			 " from a forgery: pin the server's key with --server-key (export prints it; sync.signing_key() on"
			 " the server); nothing changed");
	return EXIT_CONFIG;
}

/*
 * forged: whether a message of the bundle is not signed by the key the
 * replica trusts (sync_verify): the bundle is refused whole, before anything
 * of it is applied, answers included -- a Filed answer forged from what the
 * replica's own upload bundle carries would let go of rows never filed
 */
static verdict
forged(replica *rep, const ms_bundle *bundle, sneak_result *r, int *code)
{
	ms_bundle	b = *bundle;
	const uint8_t *msg;
	size_t		len;
	uint32_t	i = 0;
	char		err[AGENT_ERROR_MAX];
	char		why[AGENT_ERROR_MAX];

	*code = 0;
	while (ms_bundle_next(&b, &msg, &len))
	{
		bool		ok = false;

		i++;
		if (replica_verify(rep, msg, len, &ok, why, sizeof why, err) != STEP_OK)
		{
			r->result = "failed";
			snprintf(r->reason, sizeof r->reason, "%s", err);
			*code = EXIT_SOFTWARE;
			return VERDICT_FORGED;
		}
		if (!ok)
		{
			snprintf(r->reason, sizeof r->reason, "message %u of the bundle is not the server's: %s;"
					 " nothing of the bundle was applied", i, why);
			return VERDICT_FORGED;
		}
	}
	return VERDICT_APPLY;
}

/*
 * apply: each message in turn, as the online agent's pass applies them;
 * what stopped it in r (the caller says it)
 */
static int
apply(replica *rep, const ms_bundle *bundle, sneak_result *r)
{
	ms_bundle	b = *bundle;
	const uint8_t *msg;
	size_t		len;
	char		err[AGENT_ERROR_MAX];

	while (ms_bundle_next(&b, &msg, &len))
	{
		apply_result res;
		agent_status st = replica_apply(rep, msg, len, &res, err);

		if (st != STEP_OK)
		{
			r->result = "failed";
			snprintf(r->reason, sizeof r->reason, "%s", err);
			return st == STEP_BUSY ? EXIT_UNAVAILABLE : st == STEP_FULL ? EXIT_IOERR : EXIT_SOFTWARE;
		}
		if (strcmp(res.result, "applied") == 0)
			r->messages++;
		else if (strcmp(res.result, "filed") == 0)
			r->answers++;
		else if (strcmp(res.result, "duplicate") == 0)
			r->duplicates++;
		else
		{
			/* gap, later_protocol, wrong_replica, older_generation: nothing after it applies */
			r->result = strcmp(res.result, "gap") == 0 ? "gap" :
				strcmp(res.result, "later_protocol") == 0 ? "later_protocol" :
				strcmp(res.result, "older_generation") == 0 ? "older_generation" :
				strcmp(res.result, "wrong_replica") == 0 ? "wrong_replica" : "refused";
			snprintf(r->reason, sizeof r->reason, "sync_apply stopped at message %lld (%s), having applied %lld"
					 " messages of the bundle", (long long) res.number, res.result, (long long) r->messages);
			return EXIT_DATAERR;
		}
	}
	return 0;
}

/*
 * lanes_too: every upload of the replica's other lanes (docs/protocol.md
 * 7.2), after the first lane's: each lane's rows go in the bundle too
 */
static int
lanes_too(replica *rep, ms_bundle_writer *w, sneak_result *r, char why[AGENT_ERROR_MAX])
{
	char		lanes[AGENT_LANES_MAX][AGENT_LANE_BYTES];
	int			n = 0;

	if (replica_lanes(rep, lanes, AGENT_LANES_MAX, &n, why) != STEP_OK)
		return -1;
	for (int l = 1; l < n; l++)
		for (int i = 0; i < UPLOADS_MAX && !w->failed; i++)
		{
			uint8_t    *up = NULL;
			size_t		len = 0;

			if (replica_upload_lane(rep, lanes[l], -1, &up, &len, why) != STEP_OK)
				return -1;
			if (up == NULL)
				break;
			ms_bundle_add(w, up, len);
			free(up);
			r->uploads++;
		}
	return 0;
}

/*
 * upload: what the replica has to say into an upload bundle: every upload
 * sync_upload() makes, or, when it has nothing to say, sync_upload(0), so
 * that what it applied (Up.applied) reaches the server all the same.  On
 * failure, why in why (the caller says it).
 */
static int
upload(const sneak_options *o, replica *rep, const uint8_t uuid[16], sneak_result *r, char why[AGENT_ERROR_MAX])
{
	ms_bundle_writer w;
	uint8_t    *bundle;
	size_t		blen = 0;

	ms_bundle_begin(&w, &sneak_malloc, MS_BUNDLE_FROM_REPLICA, uuid, sneak_now_us());
	/* sync_upload() until it has nothing more to say; then sync_upload(0) if it said nothing */
	for (int i = 0; i < UPLOADS_MAX && !w.failed; i++)
	{
		uint8_t    *up = NULL;
		size_t		len = 0;
		bool		last = r->uploads == 0 && i > 0;

		if (replica_upload(rep, last ? 0 : -1, &up, &len, why) != STEP_OK)
		{
			ms_bundle_discard(&w);
			return EXIT_SOFTWARE;
		}
		if (up != NULL)
		{
			ms_bundle_add(&w, up, len);
			free(up);
			r->uploads++;
		}
		if (last || (up == NULL && r->uploads > 0))
			break;
	}
	if (!w.failed && lanes_too(rep, &w, r, why) != 0)
	{
		ms_bundle_discard(&w);
		return EXIT_SOFTWARE;
	}
	bundle = ms_bundle_finish(&w, &blen);
	if (bundle == NULL)
	{
		snprintf(why, AGENT_ERROR_MAX, "out of memory writing the upload bundle");
		return EXIT_SOFTWARE;
	}
	if (!sneak_write(o->to, bundle, blen, why))
	{
		free(bundle);
		/* the rows it carried go again in a later upload, after resend_after */
		return EXIT_CANTCREAT;
	}
	free(bundle);
	r->upload = o->to;
	return 0;
}

/*
 * upload_too: with --to, the replica's upload after a bundle applied, or
 * refused having changed nothing (code 65); code, or the upload's failure
 */
static int
upload_too(const sneak_options *o, replica *rep, const uint8_t uuid[16], sneak_result *r, int code)
{
	char		why[AGENT_ERROR_MAX];
	int			up;
	size_t		n;

	if (o->to == NULL || rep == NULL || (code != 0 && code != EXIT_DATAERR))
		return code;
	up = upload(o, rep, uuid, r, why);
	n = strlen(r->reason);
	if (up == 0 && code != 0)
		snprintf(r->reason + n, sizeof r->reason - n,
				 "; the replica's upload, written to %.300s all the same, tells the server where it is", o->to);
	else if (up != 0 && code == 0)
	{
		r->result = up == EXIT_CANTCREAT ? "unwritable" : "failed";
		snprintf(r->reason, sizeof r->reason, "the upload: %s", why);
		return up;
	}
	else if (up != 0)
		snprintf(r->reason + n, sizeof r->reason - n, "; the upload was not written: %s", why);
	return code;
}

/* forget: a replica file this command made, and its WAL */
static void
forget(const char *db)
{
	char		path[4096];

	unlink(db);
	snprintf(path, sizeof path, "%.4000s-wal", db);
	unlink(path);
	snprintf(path, sizeof path, "%.4000s-shm", db);
	unlink(path);
}

/*
 * sneak_apply: import on the replica's side: the bundle judged, applied,
 * and the replica's upload written
 */
int
sneak_apply(const sneak_options *o, const ms_bundle *b, sneak_result *r)
{
	char		err[AGENT_ERROR_MAX];
	bool		existed = access(o->db, F_OK) == 0;
	replica    *rep = replica_open(o->db, r->replica, err);
	uint8_t		claim[MS_APPLIED_MAX];
	size_t		claim_len = 0;
	int64_t		applied = 0;
	bool		open = false;
	Sync__Applied *a = NULL;
	verdict		v;
	int			code;

	if (rep == NULL)
	{
		bool		another = strstr(err, "is not replica") != NULL;

		r->result = another ? "wrong_replica" : "unreadable";
		snprintf(r->reason, sizeof r->reason, "%s%s", err,
				 another ? ": the bundle is another replica's; nothing changed" : "");
		sneak_say(o, r, another ? EXIT_DATAERR : EXIT_NOINPUT);
		return another ? EXIT_DATAERR : EXIT_NOINPUT;
	}
	if (replica_applied(rep, &applied, &open, claim, &claim_len, err) != STEP_OK)
	{
		replica_close(rep);
		r->result = "unreadable";
		snprintf(r->reason, sizeof r->reason, "%s", err);
		sneak_say(o, r, EXIT_NOINPUT);
		return EXIT_NOINPUT;
	}
	if (claim_len > 0)
	{
		char		reason[MS_REASON_MAX];

		a = ms_applied_decode(claim, claim_len, NULL, reason);
	}
	code = trusted(o, rep, r);
	if (code != 0)
	{
		if (a)
			sync__applied__free_unpacked(a, NULL);
		replica_close(rep);
		/* a file this refusal made: taken away again, nothing changed */
		if (!existed)
			forget(o->db);
		sneak_say(o, r, code);
		return code;
	}
	/* every signature first: then what it says of the chain can be believed */
	v = forged(rep, b, r, &code);
	if (v == VERDICT_APPLY)
		v = judge(b, a, (size_t) replica_max_message_bytes(rep), r);
	if (a)
		sync__applied__free_unpacked(a, NULL);
	if (code != 0)
	{
		replica_close(rep);
		if (!existed)
			forget(o->db);
		sneak_say(o, r, code);
		return code;
	}
	r->applied = applied;
	if (v != VERDICT_APPLY && !existed && !(v != VERDICT_WRONG_REPLICA && v != VERDICT_FORGED && o->to))
	{
		/* a file this refusal made: taken away again, nothing changed */
		replica_close(rep);
		forget(o->db);
		rep = NULL;
	}
	if (v != VERDICT_APPLY)
	{
		r->result = v == VERDICT_APPLIED_ALREADY ? "applied_already" :
			v == VERDICT_OUT_OF_ORDER ? "out_of_order" : v == VERDICT_FORGED ? "forged" : "wrong_replica";
		code = EXIT_DATAERR;
	}
	else
	{
		r->reason[0] = '\0';
		code = apply(rep, b, r);
	}

	/*
	 * The upload is written all the same when the bundle was refused as
	 * applied already (the upload bundle that said so was lost: the next
	 * export would carry the same again), out of order (the file is older
	 * than what the server knows: it provisions the replica again), or
	 * stopped at a gap (the upload reports it): it is the replica's upload
	 * that tells the server where it is.  Not for another replica's.
	 */
	if (v != VERDICT_WRONG_REPLICA && v != VERDICT_FORGED)
		code = upload_too(o, rep, b->replica, r, code);
	if (rep && replica_applied(rep, &applied, &open, NULL, NULL, err) == STEP_OK)
		r->applied = applied;
	replica_close(rep);
	if (code == 0)
		r->result = "applied";
	sneak_say(o, r, code);
	return code;
}

/*
 * sneak_upload_only: export on the replica's side: what the replica has to
 * say into an upload bundle, with no bundle to apply (a van whose writes
 * go to the head office before the head office's bundle comes)
 */
int
sneak_upload_only(const sneak_options *o, const uint8_t uuid[16], sneak_result *r)
{
	char		err[AGENT_ERROR_MAX];
	replica    *rep;
	int64_t		applied = 0;
	bool		open = false;
	int			code;

	if (access(o->db, F_OK) != 0)
	{
		r->result = "unreadable";
		snprintf(r->reason, sizeof r->reason, "%.300s does not exist: a replica file is made by its first bundle"
				 " (import --db FILE --from BUNDLE)", o->db);
		sneak_say(o, r, EXIT_NOINPUT);
		return EXIT_NOINPUT;
	}
	rep = replica_open(o->db, r->replica, err);
	if (rep == NULL)
	{
		bool		another = strstr(err, "is not replica") != NULL;

		r->result = another ? "wrong_replica" : "unreadable";
		snprintf(r->reason, sizeof r->reason, "%s", err);
		sneak_say(o, r, another ? EXIT_DATAERR : EXIT_NOINPUT);
		return another ? EXIT_DATAERR : EXIT_NOINPUT;
	}
	code = upload(o, rep, uuid, r, err);
	if (replica_applied(rep, &applied, &open, NULL, NULL, err) == STEP_OK)
		r->applied = applied;
	replica_close(rep);
	r->result = code == 0 ? "written" : code == EXIT_CANTCREAT ? "unwritable" : "failed";
	if (code != 0)
		snprintf(r->reason, sizeof r->reason, "the upload: %s", err);
	sneak_say(o, r, code);
	return code;
}
