/*-------------------------------------------------------------------------
 * canon.c
 *	  A key part spelled one way (canon.h): integers as int2in/int4in/int8in
 *	  take them and int8out prints them, uuids as uuid_in takes them and
 *	  uuid_out prints them, numerics as numeric_in takes them and
 *	  trim_scale then numeric_out prints them, dates and times in ISO 8601
 *	  as PostgreSQL's JSON writes them (JsonEncodeDateTime), a timestamptz
 *	  at offset zero.  The calendar is PostgreSQL's (date2j, j2date).
 *-------------------------------------------------------------------------
 */
#include "canon.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "uuid.h"

static bool
named(const char *type, const char *name)
{
	return strcmp(type, name) == 0;
}

ms_key_kind
ms_key_kind_named(const char *type, bool sqlite_integer)
{
	if (named(type, "uuid"))
		return MS_KEY_UUID;
	if (named(type, "smallint"))
		return MS_KEY_INT2;
	if (named(type, "integer"))
		return MS_KEY_INT4;
	if (named(type, "bigint") || sqlite_integer)
		return MS_KEY_INT8;
	if (named(type, "numeric"))
		return MS_KEY_NUMERIC;
	if (named(type, "date"))
		return MS_KEY_DATE;
	if (named(type, "time") || named(type, "time without time zone"))
		return MS_KEY_TIME;
	if (named(type, "timestamp") || named(type, "timestamp without time zone"))
		return MS_KEY_TIMESTAMP;
	if (named(type, "timestamptz") || named(type, "timestamp with time zone"))
		return MS_KEY_TIMESTAMPTZ;
	return MS_KEY_TEXT;
}

static bool
space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool
digit(char c)
{
	return c >= '0' && c <= '9';
}

static char
lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

/* whether p[i..] begins with word (lower case), in any case */
static bool
word_at(const char *p, size_t n, size_t i, const char *word)
{
	size_t		w = strlen(word);

	if (n - i < w)
		return false;
	for (size_t k = 0; k < w; k++)
		if (lower(p[i + k]) != word[k])
			return false;
	return true;
}

/* the part as it was given, cut short, for a reason */
#define SHOWN(p, n) (int) ((n) > 40 ? 40 : (n)), (p)

/* an integer: spaces, a sign, digits, spaces; within the kind's range */
static bool
canon_int(ms_key_kind kind, const char *p, size_t n, char *out, size_t *out_len,
		  char reason[MS_REASON_MAX])
{
	static const char *const names[] = {"", "smallint", "integer", "bigint"};
	uint64_t	limit = kind == MS_KEY_INT2 ? 32767 : kind == MS_KEY_INT4 ? 2147483647 : INT64_MAX;
	uint64_t	v = 0;
	bool		negative = false;
	size_t		i = 0;
	size_t		digits = 0;

	while (i < n && space(p[i]))
		i++;
	if (i < n && (p[i] == '+' || p[i] == '-'))
		negative = p[i++] == '-';
	for (; i < n && digit(p[i]); i++, digits++)
	{
		uint64_t	d = (uint64_t) (p[i] - '0');

		/* the most negative value is one beyond the most positive */
		if (v > (limit + (negative ? 1 : 0) - d) / 10)
			return ms_refuse(reason, "key part \"%.*s\" is out of range for type %s", SHOWN(p, n), names[kind]);
		v = v * 10 + d;
	}
	while (i < n && space(p[i]))
		i++;
	if (digits == 0 || i != n)
		return ms_refuse(reason, "key part \"%.*s\" is not a %s", SHOWN(p, n), names[kind]);
	if (negative && v > 0)
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, "-%llu", (unsigned long long) v);
	else
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, "%llu", (unsigned long long) v);
	return true;
}

/* a uuid: in braces or not, 32 hex digits, a hyphen allowed after each group of four */
static bool
canon_uuid(const char *p, size_t n, char *out, size_t *out_len, char reason[MS_REASON_MAX])
{
	uint8_t		b[16];

	if (!ms_uuid_parse_loose(p, n, b))
		return ms_refuse(reason, "key part \"%.*s\" is not a uuid", SHOWN(p, n));
	ms_uuid_text(b, out);
	*out_len = MS_UUID_TEXT - 1;
	return true;
}

/* ---- numeric ----------------------------------------------------------- */

/* numeric's own bounds: digits before the point, and after it */
#define NUMERIC_WEIGHT_MAX 131072
#define NUMERIC_SCALE_MAX 16383
#define NUMERIC_EXPONENT_MAX 1000

/*
 * a numeric: spaces, NaN or an infinity in any case; or a sign, digits with
 * a point among or beside them, an exponent (e, a sign, at most 1000),
 * spaces.  Spelled as numeric_out prints trim_scale of it: no exponent, no
 * leading or trailing zeros but the one before the point ("0.5"), no
 * point when nothing follows it, 0 without a sign.
 */
static bool
canon_numeric(const char *p, size_t n, char *out, size_t *out_len, char reason[MS_REASON_MAX])
{
	size_t		i = 0;
	size_t		end = n;
	bool		negative = false;
	bool		point = false;
	size_t		first = 0;		/* where the digits begin and end, the point aside */
	size_t		last;
	long		ndigits = 0;
	long		before = 0;		/* digits before the point */
	long		exponent = 0;
	long		lead = 0;		/* leading zeros */
	long		trail = 0;		/* trailing zeros */
	long		weight;			/* digits before the point, spelled */
	long		significant;
	long		k;
	char	   *o = out;

	while (i < end && space(p[i]))
		i++;
	while (end > i && space(p[end - 1]))
		end--;
	if (end - i == 3 && word_at(p, end, i, "nan"))
	{
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, "NaN");
		return true;
	}
	if (i < end && (p[i] == '+' || p[i] == '-'))
		negative = p[i++] == '-';
	if ((end - i == 8 && word_at(p, end, i, "infinity")) || (end - i == 3 && word_at(p, end, i, "inf")))
	{
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, negative ? "-Infinity" : "Infinity");
		return true;
	}
	first = i;
	for (; i < end && (digit(p[i]) || (p[i] == '.' && !point)); i++)
	{
		if (p[i] == '.')
			point = true;
		else
		{
			ndigits++;
			before += point ? 0 : 1;
		}
	}
	last = i;
	if (ndigits == 0)
		return ms_refuse(reason, "key part \"%.*s\" is not a numeric", SHOWN(p, n));
	if (i < end && (p[i] == 'e' || p[i] == 'E'))
	{
		bool		eneg = false;
		size_t		edigits = 0;

		i++;
		if (i < end && (p[i] == '+' || p[i] == '-'))
			eneg = p[i++] == '-';
		for (; i < end && digit(p[i]); i++, edigits++)
			if ((exponent = exponent * 10 + (p[i] - '0')) > NUMERIC_EXPONENT_MAX)
				return ms_refuse(reason, "key part \"%.*s\": its exponent is beyond %d", SHOWN(p, n),
								 NUMERIC_EXPONENT_MAX);
		if (edigits == 0)
			return ms_refuse(reason, "key part \"%.*s\" is not a numeric", SHOWN(p, n));
		if (eneg)
			exponent = -exponent;
	}
	if (i != end)
		return ms_refuse(reason, "key part \"%.*s\" is not a numeric", SHOWN(p, n));

	/* the value is 0.d1d2...dn times ten to the weight: count the zeros at either end */
	for (size_t j = first; j < last; j++)
		if (p[j] == '0')
			lead++;
		else if (p[j] != '.')
			break;
	for (size_t j = last; j > first; j--)
		if (p[j - 1] == '0')
			trail++;
		else if (p[j - 1] != '.')
			break;
	if (lead == ndigits)
	{
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, "0");
		return true;
	}
	weight = before + exponent - lead;
	significant = ndigits - lead - trail;
	if (weight > NUMERIC_WEIGHT_MAX || significant - weight > NUMERIC_SCALE_MAX)
		return ms_refuse(reason, "key part \"%.*s\" is out of range for type numeric", SHOWN(p, n));

	if (negative)
		*o++ = '-';
	if (weight <= 0)
	{
		*o++ = '0';
		*o++ = '.';
		for (k = weight; k < 0; k++)
			*o++ = '0';
	}
	k = 0;
	for (size_t j = first; j < last && k < lead + significant; j++)
	{
		if (p[j] == '.')
			continue;
		if (k >= lead)
		{
			if (k - lead == weight && weight > 0)
				*o++ = '.';
			*o++ = p[j];
		}
		k++;
	}
	for (k = significant; k < weight; k++)
		*o++ = '0';
	*o = '\0';
	*out_len = (size_t) (o - out);
	return true;
}

/* ---- dates and times --------------------------------------------------- */

#define USECS_PER_DAY INT64_C(86400000000)
#define POSTGRES_EPOCH_JDATE 2451545	/* 2000-01-01 */
#define DATE_END_JULIAN 2147483494	/* 5874898-01-01 */
#define MIN_TIMESTAMP INT64_C(-211813488000000000)	/* 4714-11-24 00:00 BC */
#define END_TIMESTAMP INT64_C(9223371331200000000)	/* 294277-01-01 00:00 */
#define MAX_OFFSET (15 * 3600 + 59 * 60 + 59)

/* date2j and j2date of PostgreSQL (datetime.c): the proleptic Gregorian calendar, year 0 is 1 BC */
static int64_t
date2j(int64_t year, int64_t month, int64_t day)
{
	int64_t		julian;
	int64_t		century;

	if (month > 2)
	{
		month += 1;
		year += 4800;
	}
	else
	{
		month += 13;
		year += 4799;
	}
	century = year / 100;
	julian = year * 365 - 32167;
	julian += year / 4 - century + century / 4;
	julian += 7834 * month / 256 + day;
	return julian;
}

static void
j2date(int64_t jd, int *year, int *month, int *day)
{
	uint64_t	julian = (uint64_t) jd + 32044;
	uint64_t	quad = julian / 146097;
	uint64_t	extra = (julian - quad * 146097) * 4 + 3;
	int64_t		y;

	julian += 60 + quad * 3 + extra / 146097;
	quad = julian / 1461;
	julian -= quad * 1461;
	y = (int64_t) (julian * 4 / 1461);
	julian = ((y != 0) ? ((julian + 305) % 365) : ((julian + 306) % 366)) + 123;
	y += (int64_t) quad * 4;
	*year = (int) (y - 4800);
	quad = julian * 2141 / 65536;
	*day = (int) (julian - 7834 * quad / 256);
	*month = (int) ((quad + 10) % 12 + 1);
}

static bool
leap(int64_t year)
{
	return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

/* digits at p[*i]: at least min, at most max of them, into *v */
static bool
number(const char *p, size_t n, size_t *i, int min, int max, int64_t *v)
{
	int			k = 0;

	*v = 0;
	for (; *i < n && digit(p[*i]) && k < max; (*i)++, k++)
		*v = *v * 10 + (p[*i] - '0');
	return k >= min && !(*i < n && digit(p[*i]));
}

/* a date: Y...Y-M-D, four to seven digits of year; its month and day checked (BC comes later) */
static bool
parse_date(const char *p, size_t n, size_t *i, int64_t *year, int64_t *month, int64_t *day)
{
	return number(p, n, i, 4, 7, year) && *i < n && p[(*i)++] == '-' &&
		number(p, n, i, 1, 2, month) && *i < n && p[(*i)++] == '-' &&
		number(p, n, i, 1, 2, day) && *year >= 1 && *month >= 1 && *month <= 12 && *day >= 1;
}

/*
 * a time of day: H:MM[:SS[.F]], in microseconds.  Seconds up to 60 and
 * 24:00:00 are taken, as PostgreSQL takes them (they run into the next
 * minute, or day); a fraction beyond microseconds is rounded as
 * PostgreSQL rounds it (rint), nine digits at most, and one halfway
 * between two microseconds refused (where rint of a double may go either way).
 */
static bool
parse_time(const char *p, size_t n, size_t *i, int64_t *usec, bool *halfway)
{
	int64_t		h,
				m,
				s = 0,
				f = 0;
	int			fdigits = 0;

	*halfway = false;
	if (!number(p, n, i, 1, 2, &h) || *i >= n || p[(*i)++] != ':' || !number(p, n, i, 2, 2, &m))
		return false;
	if (*i < n && p[*i] == ':')
	{
		(*i)++;
		if (!number(p, n, i, 2, 2, &s))
			return false;
		if (*i < n && p[*i] == '.')
		{
			int64_t		rest = 0;
			int			nrest = 0;

			(*i)++;
			for (; *i < n && digit(p[*i]); (*i)++, fdigits++)
			{
				if (fdigits >= 9)
					return false;
				if (fdigits < 6)
					f = f * 10 + (p[*i] - '0');
				else
				{
					rest = rest * 10 + (p[*i] - '0');
					nrest++;
				}
			}
			if (fdigits == 0)
				return false;
			for (int k = fdigits; k < 6; k++)
				f *= 10;
			if (nrest > 0)
			{
				int64_t		half = 5;

				for (int k = 1; k < nrest; k++)
					half *= 10;
				if (rest == half)
					*halfway = true;
				f += rest > half ? 1 : 0;
			}
		}
	}
	if (h > 24 || m > 59 || s > 60 || (h == 24 && (m > 0 || s > 0 || f > 0)))
		return false;
	*usec = ((h * 60 + m) * 60 + s) * 1000000 + f;
	return true;
}

/*
 * an offset from UTC: Z, UTC or GMT; or a sign and hours, then minutes and
 * seconds, with colons or without; in seconds east, at most 15:59:59
 */
static bool
parse_offset(const char *p, size_t n, size_t *i, int *offset)
{
	int64_t		h = 0,
				m = 0,
				s = 0;
	int			sign;

	if (word_at(p, n, *i, "utc") || word_at(p, n, *i, "gmt"))
	{
		*i += 3;
		*offset = 0;
		return true;
	}
	if (p[*i] == 'z' || p[*i] == 'Z')
	{
		(*i)++;
		*offset = 0;
		return true;
	}
	sign = p[(*i)++] == '-' ? -1 : 1;
	if (*i + 4 <= n && digit(p[*i]) && digit(p[*i + 1]) && digit(p[*i + 2]) && digit(p[*i + 3]))
	{
		/* +HHMM or +HHMMSS */
		size_t		start = *i;

		if (!number(p, n, i, 4, 6, &h) || *i - start == 5)
			return false;
		if (*i - start == 6)
		{
			s = h % 100;
			h /= 100;
		}
		m = h % 100;
		h /= 100;
	}
	else
	{
		if (!number(p, n, i, 1, 2, &h))
			return false;
		if (*i < n && p[*i] == ':')
		{
			(*i)++;
			if (!number(p, n, i, 2, 2, &m))
				return false;
			if (*i < n && p[*i] == ':')
			{
				(*i)++;
				if (!number(p, n, i, 2, 2, &s))
					return false;
			}
		}
	}
	if (h > 15 || m > 59 || s > 59)
		return false;
	*offset = sign * (int) (h * 3600 + m * 60 + s);
	return true;
}

/* what comes after a date and time: an offset, BC */
static bool
offset_ahead(const char *p, size_t n, size_t i)
{
	while (i < n && space(p[i]))
		i++;
	if (i >= n)
		return false;
	if (p[i] == '+' || p[i] == '-')
		return i + 1 < n && digit(p[i + 1]);
	if (word_at(p, n, i, "utc") || word_at(p, n, i, "gmt"))
		return true;
	return (p[i] == 'z' || p[i] == 'Z') && (i + 1 == n || space(p[i + 1]));
}

/* the seconds and fraction of a time of day in microseconds, as AppendSeconds writes them */
static char *
write_time(char *o, int64_t usec)
{
	int64_t		f = usec % 1000000;
	int64_t		s = usec / 1000000;

	o += sprintf(o, "%02d:%02d:%02d", (int) (s / 3600), (int) (s / 60 % 60), (int) (s % 60));
	if (f > 0)
	{
		o += sprintf(o, ".%06d", (int) f);
		while (o[-1] == '0')
			o--;
	}
	*o = '\0';
	return o;
}

/* a date of an astronomical year, as EncodeDateOnly writes it (BC at the end is the caller's) */
static char *
write_date(char *o, int year, int month, int day)
{
	return o + sprintf(o, "%04d-%02d-%02d", year > 0 ? year : 1 - year, month, day);
}

static bool
infinity(const char *p, size_t i, size_t end, char *out, size_t *out_len)
{
	if (end - i == 8 && word_at(p, end, i, "infinity"))
		*out_len = (size_t) sprintf(out, "infinity");
	else if (end - i == 9 && word_at(p, end, i, "-infinity"))
		*out_len = (size_t) sprintf(out, "-infinity");
	else
		return false;
	return true;
}

static const char *const kind_names[] = {
	[MS_KEY_DATE] = "date", [MS_KEY_TIME] = "time", [MS_KEY_TIMESTAMP] = "timestamp",
	[MS_KEY_TIMESTAMPTZ] = "timestamptz"
};

/*
 * a date, time, timestamp or timestamptz in ISO 8601: Y-M-D; H:MM[:SS[.F]];
 * the date, then T or spaces and the time; an offset (a timestamptz at
 * none is at UTC; a time's or a timestamp's is read past, as PostgreSQL
 * reads past it); BC; spaces either side; infinity and -infinity
 */
static bool
canon_datetime(ms_key_kind kind, const char *p, size_t n, char *out, size_t *out_len,
			   char reason[MS_REASON_MAX])
{
	size_t		i = 0;
	size_t		end = n;
	int64_t		year = 0,
				month = 0,
				day = 0,
				usec = 0;
	int			offset = 0;
	bool		bc = false;
	bool		halfway = false;
	bool		ok;
	char	   *o = out;

	while (i < end && space(p[i]))
		i++;
	while (end > i && space(p[end - 1]))
		end--;
	if (kind != MS_KEY_TIME && infinity(p, i, end, out, out_len))
		return true;
	if (kind == MS_KEY_TIME)
		ok = parse_time(p, end, &i, &usec, &halfway);
	else
	{
		ok = parse_date(p, end, &i, &year, &month, &day);
		if (ok && kind != MS_KEY_DATE && i < end && (p[i] == 'T' || space(p[i])))
		{
			size_t		t = i + 1;

			while (p[i] != 'T' && t < end && space(p[t]))
				t++;
			if (t < end && digit(p[t]))
			{
				i = t;
				ok = parse_time(p, end, &i, &usec, &halfway);
			}
		}
	}
	if (ok && kind != MS_KEY_DATE && offset_ahead(p, end, i))
	{
		while (space(p[i]))
			i++;
		ok = parse_offset(p, end, &i, &offset);
	}
	if (ok && kind != MS_KEY_TIME && i < end)
	{
		size_t		b = i;

		while (b < end && space(p[b]))
			b++;
		if (b > i && end - b == 2 && word_at(p, end, b, "bc"))
		{
			bc = true;
			i = end;
		}
	}
	if (!ok || i != end)
		return ms_refuse(reason, "key part \"%.*s\" is not a %s in ISO 8601", SHOWN(p, n), kind_names[kind]);
	if (halfway)
		return ms_refuse(reason, "key part \"%.*s\" is halfway between two microseconds", SHOWN(p, n));
	if (kind == MS_KEY_TIME)
	{
		if (usec > USECS_PER_DAY)
			return ms_refuse(reason, "key part \"%.*s\" is out of range for type time", SHOWN(p, n));
		*out_len = (size_t) (write_time(o, usec) - out);
		return true;
	}
	if (bc)
		year = 1 - year;		/* astronomical: 1 BC is year 0 */
	if (day > (month == 2 ? (leap(year) ? 29 : 28) : (month == 4 || month == 6 || month == 9 || month == 11) ? 30 : 31))
		return ms_refuse(reason, "key part \"%.*s\" is not a %s: no such day", SHOWN(p, n), kind_names[kind]);
	if (kind == MS_KEY_DATE)
	{
		int64_t		j = date2j(year, month, day);

		if (j < 0 || j >= DATE_END_JULIAN)
			return ms_refuse(reason, "key part \"%.*s\" is out of range for type date", SHOWN(p, n));
		o = write_date(o, (int) year, (int) month, (int) day);
	}
	else
	{
		int64_t		j = date2j(year, month, day);
		int64_t		t;
		int64_t		days;
		int			y,
					m,
					d;

		/* within a few days of the range, so that this never overflows */
		if (j < -2 || j > 109203530)
			return ms_refuse(reason, "key part \"%.*s\" is out of range for type %s", SHOWN(p, n), kind_names[kind]);
		t = (j - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY + usec;
		if (kind == MS_KEY_TIMESTAMPTZ)
			t -= (int64_t) offset * 1000000;
		if (t < MIN_TIMESTAMP || t >= END_TIMESTAMP)
			return ms_refuse(reason, "key part \"%.*s\" is out of range for type %s", SHOWN(p, n), kind_names[kind]);
		days = t / USECS_PER_DAY;
		usec = t % USECS_PER_DAY;
		if (usec < 0)
		{
			usec += USECS_PER_DAY;
			days--;
		}
		j2date(days + POSTGRES_EPOCH_JDATE, &y, &m, &d);
		year = y;
		o = write_date(o, y, m, d);
		*o++ = 'T';
		o = write_time(o, usec);
		if (kind == MS_KEY_TIMESTAMPTZ)
			o += sprintf(o, "+00:00");
	}
	if (year <= 0)
		o += sprintf(o, " BC");
	*out_len = (size_t) (o - out);
	return true;
}

bool
ms_key_canon(ms_key_kind kind, const char *part, size_t n, char *out, size_t *out_len,
			 char reason[MS_REASON_MAX])
{
	switch (kind)
	{
		case MS_KEY_TEXT:
			return ms_refuse(reason, "a text key part is its own spelling");
		case MS_KEY_INT2:
		case MS_KEY_INT4:
		case MS_KEY_INT8:
			return canon_int(kind, part, n, out, out_len, reason);
		case MS_KEY_UUID:
			return canon_uuid(part, n, out, out_len, reason);
		case MS_KEY_NUMERIC:
			return canon_numeric(part, n, out, out_len, reason);
		case MS_KEY_DATE:
		case MS_KEY_TIME:
		case MS_KEY_TIMESTAMP:
		case MS_KEY_TIMESTAMPTZ:
			return canon_datetime(kind, part, n, out, out_len, reason);
		case MS_KEY_FOLDED:
			return ms_refuse(reason, "a case-folded key part is spelled by the server's locale");
	}
	return ms_refuse(reason, "no such kind of key part");
}

void
ms_key_canon_digits(ms_key_kind kind, const char *spelled, size_t n, int *before, int *after)
{
	const char *point = memchr(spelled, '.', n);
	size_t		start = n > 0 && spelled[0] == '-' ? 1 : 0;

	*before = *after = 0;
	if (kind == MS_KEY_NUMERIC)
	{
		if (n == start || !digit(spelled[start]))
			return;				/* NaN, the infinities */
		*before = (int) ((point ? (size_t) (point - spelled) : n) - start);
		if (*before == 1 && spelled[start] == '0')
			*before = 0;
		*after = point ? (int) (n - (size_t) (point - spelled) - 1) : 0;
		return;
	}
	/* a time's fraction: the digits after the point, up to what follows them */
	if (point != NULL)
		for (const char *c = point + 1; c < spelled + n && digit(*c); c++)
			(*after)++;
}
