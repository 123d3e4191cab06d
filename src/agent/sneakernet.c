/*-------------------------------------------------------------------------
 * sneakernet.c
 *	  magic_sync_agent export / import: a replica's messages carried as
 *	  files, for a van or a ship that has no network (docs/protocol.md 11).
 *
 *   export --server CONNINFO --replica UUID --to FILE
 *       what waits for the replica on the server (sync.pull: its Filed
 *       answers, then its outbox, sealed as they are) into one bundle
 *   export --db FILE.db --replica UUID --to UPLOAD
 *       what the replica has to say (sync_upload) into an upload bundle,
 *       with no bundle to apply
 *   import --db FILE.db --from BUNDLE [--to UPLOAD]
 *       each message applied on the replica (sync_apply, one transaction
 *       each), then what the replica has to say (sync_upload) into an
 *       upload bundle
 *   import --server CONNINFO --from UPLOAD
 *       each upload filed on the server (sync.file), which acknowledges
 *       what the replica applied, as the online agent's filings do
 *
 * A bundle that was applied before, that comes out of order, or that is
 * another replica's (or of the other kind) changes nothing: the command
 * says why and exits 65.  Each command prints one line, or with --json one
 * JSON object (event export or import).
 *-------------------------------------------------------------------------
 */
#include "sneakernet.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uuid.h"

static void *
sneak_alloc(void *data, size_t size)
{
	(void) data;
	return malloc(size);
}

static void
sneak_free(void *data, void *p)
{
	(void) data;
	free(p);
}

ms_allocator sneak_malloc = {sneak_alloc, sneak_free, NULL};

static const char usage_text[] =
"Usage: magic_sync_agent export --server CONNINFO --replica UUID --to FILE [OPTION]...\n"
"       magic_sync_agent export --db FILE.db --replica UUID --to UPLOAD [OPTION]...\n"
"       magic_sync_agent import --db FILE.db --from BUNDLE [--to UPLOAD] [OPTION]...\n"
"       magic_sync_agent import --server CONNINFO --from UPLOAD [OPTION]...\n"
"\n"
"Sneakernet: a replica that has no network (a van, a ship) exchanges files.\n"
"\n"
"  export   writes what waits on the server for the replica (its outbox, sealed\n"
"           as it is, and the answers to its uploads) into one bundle FILE\n"
"  export --db\n"
"           writes what the replica has to say into an upload bundle, with no\n"
"           bundle to apply (the van's writes go before the head office's come)\n"
"  import --db\n"
"           applies a bundle to the replica file, each message in a\n"
"           transaction of its own, and with --to writes what the replica\n"
"           has to say (its writes, and what it applied) into an upload bundle\n"
"  import --server\n"
"           files an upload bundle on the server, acknowledging what the\n"
"           replica applied\n"
"\n"
"Every message of a bundle to the replica is checked against the server key\n"
"the replica trusts before any is applied: a bundle is untrusted bytes, and\n"
"one the server did not sign changes nothing.\n"
"\n"
"A bundle applied twice, out of order, to another replica's file or on the\n"
"wrong side changes nothing: the command says why and exits 65.  Export again\n"
"after an upload bundle is filed: the new bundle carries what the replica\n"
"still lacks, so a lost or damaged file costs nothing but a trip.\n"
"\n"
"Options:\n"
"  --replica UUID     export: the replica; import: refuse a bundle of another;\n"
"                     import --server as a role that may file for any replica\n"
"                     (sync_admin): required, the replica whose bundle it is\n"
"  --server-key HEX   import --db: the server's signing key (64 hexadecimal\n"
"                     digits, sync.signing_key() on the server; export prints\n"
"                     it), pinned into the file in place of any other.  A\n"
"                     file that trusts no key yet takes no bundle without it\n"
"  --pull-bytes N     export: bytes of messages pulled at a time (default 4194304)\n"
"  --name LABEL       put LABEL in front of the line (and in JSON: \"name\")\n"
"  --json             one JSON object on stdout (event export or import)\n"
"  --quiet            print errors only\n"
"\n"
"Exit codes:\n"
"   0  done\n"
"  64  the command line is wrong\n"
"  65  the bundle is refused: damaged, another replica's, of the other kind,\n"
"      applied already, out of order, or a message in it not signed by the\n"
"      server key the replica trusts (forged); nothing changed\n"
"  66  the bundle or the replica file cannot be read\n"
"  69  the server cannot be reached\n"
"  70  an error retrying will not fix\n"
"  73  the bundle cannot be written\n"
"  77  the server refuses this role or replica\n"
"  78  import --db: the replica trusts no server key to check the bundle\n"
"      with (--server-key pins one); nothing changed\n";

static int
usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "magic_sync_agent: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'magic_sync_agent %s --help'.\n", "export");
	return EXIT_USAGE;
}

/*
 * sneak_read: a whole bundle file, at most SNEAK_FILE_MAX bytes; NULL with
 * the reason, *damaged when its head is no bundle's.  The head is read and
 * checked first (ms_bundle_head_check): a file that is no bundle is refused
 * having read 40 bytes of it, not a gigabyte.
 */
uint8_t *
sneak_read(const char *path, size_t *len, bool *damaged, char err[AGENT_ERROR_MAX])
{
	FILE	   *f = fopen(path, "rb");
	uint8_t    *buf = NULL;
	size_t		cap = 0,
				n = 0;
	char		reason[MS_REASON_MAX];

	*damaged = false;
	if (f == NULL)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot open %.300s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;)
	{
		size_t		got;

		if (n == cap)
		{
			uint8_t    *grown;

			if (cap >= SNEAK_FILE_MAX)
			{
				snprintf(err, AGENT_ERROR_MAX, "%.300s is larger than the %zu bytes a bundle may be", path,
						 SNEAK_FILE_MAX);
				break;
			}
			cap = cap ? cap * 2 : 65536;
			grown = realloc(buf, cap + 1);
			if (grown == NULL)
			{
				snprintf(err, AGENT_ERROR_MAX, "out of memory reading %.300s", path);
				break;
			}
			buf = grown;
		}
		/* the head alone first, then the rest once it is a bundle's */
		got = fread(buf + n, 1, n < MS_BUNDLE_HEAD ? MS_BUNDLE_HEAD - n : cap - n, f);
		n += got;
		if (n >= MS_BUNDLE_HEAD && n - got < MS_BUNDLE_HEAD && !ms_bundle_head_check(buf, n, reason))
		{
			snprintf(err, AGENT_ERROR_MAX, "%.300s: %s", path, reason);
			*damaged = true;
			break;
		}
		if (got == 0)
		{
			if (ferror(f))
			{
				snprintf(err, AGENT_ERROR_MAX, "cannot read %.300s: %s", path, strerror(errno));
				break;
			}
			fclose(f);
			*len = n;
			return buf;
		}
	}
	fclose(f);
	free(buf);
	return NULL;
}

/*
 * sneak_write: the bundle written beside its name, synced, then renamed
 * over it: a bundle cut short by a full disk or a crash never stands under
 * the name (its check would refuse it anyway).  The file beside it is made
 * anew (O_EXCL, O_NOFOLLOW): one left by a crash is taken away first, and
 * a link planted there is neither followed nor written through.
 */
bool
sneak_write(const char *path, const uint8_t *buf, size_t len, char err[AGENT_ERROR_MAX])
{
	char		tmp[4096];
	FILE	   *f;
	int			fd;
	bool		ok;

	snprintf(tmp, sizeof tmp, "%s.part", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
	f = fd < 0 ? NULL : fdopen(fd, "wb");
	if (f == NULL)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot write %.300s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	ok = fwrite(buf, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (!ok)
		snprintf(err, AGENT_ERROR_MAX, "cannot write %.300s: %s", tmp, strerror(errno));
	if (fclose(f) != 0 && ok)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot write %.300s: %s", tmp, strerror(errno));
		ok = false;
	}
	if (ok && rename(tmp, path) != 0)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot rename %.200s to %.200s: %s", tmp, path, strerror(errno));
		ok = false;
	}
	if (!ok)
		unlink(tmp);
	return ok;
}

/* ---- what a command says ------------------------------------------------ */

static void
json_field(const char *key, const char *value)
{
	printf(",\"%s\":", key);
	agent_json_string(value);
}

uint64_t
sneak_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static void
say_json(const sneak_options *o, const sneak_result *r, int code)
{
	agent_json_event(r->event);
	if (o->name)
		json_field("name", o->name);
	json_field("result", r->result);
	json_field("replica", r->replica);
	json_field("bundle", r->bundle);
	if (r->upload)
		json_field("upload", r->upload);
	printf(",\"messages\":%lld,\"answers\":%lld,\"duplicates\":%lld,\"first\":%lld,\"last\":%lld"
		   ",\"applied\":%lld,\"uploads\":%lld,\"filed\":%lld,\"refused\":%lld,\"dropped\":%lld"
		   ",\"waiting\":%lld,\"acknowledged\":%lld,\"code\":%d",
		   (long long) r->messages, (long long) r->answers, (long long) r->duplicates,
		   (long long) r->first, (long long) r->last, (long long) r->applied, (long long) r->uploads,
		   (long long) r->filed, (long long) r->refused, (long long) r->dropped, (long long) r->waiting,
		   (long long) r->acknowledged, code);
	if (r->server_key[0])
		json_field("server_key", r->server_key);
	if (r->reason[0])
		json_field("reason", r->reason);
	puts("}");
	fflush(stdout);
}

/* sneak_say: the command's one line: stdout when it did its work, stderr when refused or failed */
void
sneak_say(const sneak_options *o, const sneak_result *r, int code)
{
	FILE	   *f = code == 0 ? stdout : stderr;
	const char *label = o->name ? o->name : "";
	const char *sep = *label ? ": " : "";

	if (o->mode == REPORT_JSON)
	{
		say_json(o, r, code);
		if (code == 0)
			return;
	}
	else if (o->mode == REPORT_QUIET && code == 0)
		return;
	if (code != 0)
	{
		fprintf(f, "%s%s%s %s refused (%s): %s\n", label, sep, r->event, r->bundle ? r->bundle : "",
				r->result, r->reason);
		return;
	}
	if (strcmp(r->event, "export") == 0 && r->upload)
		fprintf(f, "%s%swrote replica %s's upload to %s: %lld uploads; it applied through %lld\n", label, sep,
				r->replica, r->upload, (long long) r->uploads, (long long) r->applied);
	else if (strcmp(r->event, "export") == 0)
		fprintf(f, "%s%sexported to %s for replica %s: %lld messages (%lld..%lld), %lld answers%s%s\n",
				label, sep, r->bundle, r->replica, (long long) r->messages, (long long) r->first,
				(long long) r->last, (long long) r->answers, r->server_key[0] ? "; signed by server key " : "",
				r->server_key);
	else if (r->upload || strcmp(r->result, "applied") == 0)
		fprintf(f, "%s%simported %s into replica %s: %lld messages applied, %lld duplicates, %lld answers;"
				" applied through %lld%s%s\n", label, sep, r->bundle, r->replica, (long long) r->messages,
				(long long) r->duplicates, (long long) r->answers, (long long) r->applied,
				r->upload ? "; upload written to " : "", r->upload ? r->upload : "");
	else
		fprintf(f, "%s%sfiled %s for replica %s: %lld uploads (%lld duplicates), %lld rows filed, %lld refused,"
				" %lld dropped, %lld waiting; acknowledged through %lld\n", label, sep, r->bundle, r->replica,
				(long long) r->uploads, (long long) r->duplicates, (long long) r->filed, (long long) r->refused,
				(long long) r->dropped, (long long) r->waiting, (long long) r->acknowledged);
	if (r->reason[0])
		fprintf(f, "%s%s  %s\n", label, sep, r->reason);
}

/* ---- the commands -------------------------------------------------------- */

enum
{
	OPT_SERVER = 1, OPT_REPLICA, OPT_DB, OPT_FROM, OPT_TO, OPT_NAME, OPT_SERVER_KEY, OPT_PULL_BYTES,
	OPT_JSON, OPT_QUIET, OPT_HELP = 'h'
};

static const struct option long_options[] = {
	{"server", required_argument, NULL, OPT_SERVER},
	{"replica", required_argument, NULL, OPT_REPLICA},
	{"db", required_argument, NULL, OPT_DB},
	{"from", required_argument, NULL, OPT_FROM},
	{"to", required_argument, NULL, OPT_TO},
	{"name", required_argument, NULL, OPT_NAME},
	{"server-key", required_argument, NULL, OPT_SERVER_KEY},
	{"pull-bytes", required_argument, NULL, OPT_PULL_BYTES},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"help", no_argument, NULL, OPT_HELP},
	{NULL, 0, NULL, 0}
};

static int
parse(int argc, char **argv, sneak_options *o)
{
	int			c;
	char		why[256];

	memset(o, 0, sizeof *o);
	o->pull_bytes = 4 << 20;
	o->mode = REPORT_HUMAN;
	while ((c = agent_getopt(argc, argv, "h", long_options, why, sizeof why)) != -1)
	{
		switch (c)
		{
			case OPT_HELP:
				fputs(usage_text, stdout);
				return -1;
			case OPT_JSON:
				o->mode = REPORT_JSON;
				break;
			case OPT_QUIET:
				o->mode = REPORT_QUIET;
				break;
			case OPT_SERVER:
				o->server = optarg;
				break;
			case OPT_REPLICA:
				o->replica = optarg;
				break;
			case OPT_DB:
				o->db = optarg;
				break;
			case OPT_FROM:
				o->from = optarg;
				break;
			case OPT_TO:
				o->to = optarg;
				break;
			case OPT_NAME:
				o->name = optarg;
				break;
			case OPT_SERVER_KEY:
				o->server_key = optarg;
				break;
			case OPT_PULL_BYTES:
				{
					char	   *end;
					long		v = strtol(optarg, &end, 10);

					if (*end || v < 1024 || v > (1L << 30))
						return usage("--pull-bytes takes 1024 to 1073741824 bytes, not '%s'", optarg);
					o->pull_bytes = (int) v;
				}
				break;
			default:
				return usage("%s", why);
		}
	}
	return 0;
}

/* refuse: the bundle is not for this command or replica; nothing changes */
static int
refuse(const sneak_options *o, sneak_result *r, const char *result, int code, const char *fmt, const char *a,
	   const char *b)
{
	r->result = result;
	snprintf(r->reason, sizeof r->reason, fmt, a, b);
	sneak_say(o, r, code);
	return code;
}

static int
do_export(const sneak_options *o, sneak_result *r)
{
	uint8_t		uuid[16];

	r->event = "export";
	r->bundle = o->to;
	if ((o->server == NULL) == (o->db == NULL) || o->replica == NULL || o->to == NULL || o->from)
		return usage("export takes --server CONNINFO --replica UUID --to FILE, or --db FILE.db --replica UUID"
					 " --to UPLOAD%s", "");
	if (!ms_uuid_parse(o->replica, strlen(o->replica), uuid))
		return usage("--replica takes a uuid (8-4-4-4-12 hexadecimal digits), not '%s'", o->replica);
	ms_uuid_text(uuid, r->replica);
	if (o->db)
	{
		r->upload = o->to;
		return sneak_upload_only(o, uuid, r);
	}
	return sneak_export(o, uuid, r);
}

static int
do_import(const sneak_options *o, sneak_result *r)
{
	uint8_t    *buf;
	size_t		len = 0;
	char		err[AGENT_ERROR_MAX];
	char		reason[MS_REASON_MAX];
	ms_bundle	b;
	uint8_t		want[16];
	uint8_t		key[32];
	int			code;
	bool		server_side = o->server != NULL;
	bool		damaged = false;

	r->event = "import";
	r->bundle = o->from;
	if (o->from == NULL || (o->server == NULL) == (o->db == NULL) || (server_side && o->to))
		return usage("import takes --db FILE.db --from BUNDLE [--to UPLOAD], or --server CONNINFO --from UPLOAD%s",
					 "");
	if (o->replica && !ms_uuid_parse(o->replica, strlen(o->replica), want))
		return usage("--replica takes a uuid (8-4-4-4-12 hexadecimal digits), not '%s'", o->replica);
	if (o->server_key && (server_side || !agent_key_parse(o->server_key, key)))
		return usage("--server-key is for import --db, and takes the server's key as 64 hexadecimal digits"
					 " (sync.signing_key()), not '%s'", o->server_key);
	buf = sneak_read(o->from, &len, &damaged, err);
	if (buf == NULL)
		return damaged ? refuse(o, r, "damaged", EXIT_DATAERR, "%s%s", err, "") :
			refuse(o, r, "unreadable", EXIT_NOINPUT, "%s%s", err, "");
	/* a replica's message is at most what it takes; a bound the size of the file will do for both */
	if (!ms_bundle_open(&b, buf, len, len, reason))
	{
		code = refuse(o, r, "damaged", EXIT_DATAERR, "%s: %s", o->from, reason);
		free(buf);
		return code;
	}
	ms_uuid_text(b.replica, r->replica);
	if (server_side && b.kind != MS_BUNDLE_FROM_REPLICA)
		code = refuse(o, r, "wrong_kind", EXIT_DATAERR,
					  "%s is a bundle to replica %s, made by export for its file: import it with --db, not --server",
					  o->from, r->replica);
	else if (!server_side && b.kind != MS_BUNDLE_TO_REPLICA)
		code = refuse(o, r, "wrong_kind", EXIT_DATAERR,
					  "%s is an upload bundle from replica %s, for the server: import it with --server, not --db",
					  o->from, r->replica);
	else if (o->replica && memcmp(want, b.replica, 16) != 0)
		code = refuse(o, r, "wrong_replica", EXIT_DATAERR, "%s is replica %s's bundle, not the one --replica names",
					  o->from, r->replica);
	else
		code = server_side ? sneak_file(o, &b, r) : sneak_apply(o, &b, r);
	free(buf);
	return code;
}

/* sneakernet_main: argv[0] is export or import */
int
sneakernet_main(int argc, char **argv)
{
	sneak_options o;
	sneak_result r;
	int			rc = parse(argc, argv, &o);

	if (rc != 0)
		return rc < 0 ? 0 : rc;
	/* what the server says besides results (report_notice) follows --json and --name too */
	report_init(o.mode, o.name);
	memset(&r, 0, sizeof r);
	r.result = "";
	if (strcmp(argv[0], "export") == 0)
		return do_export(&o, &r);
	return do_import(&o, &r);
}
