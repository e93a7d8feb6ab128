/*-------------------------------------------------------------------------
 *
 * evidence.c
 *	  The evidence trail (RFC-WF-0018 section IX): append-only, hash
 *	  chained per command, written by this file alone, with the rights of
 *	  the owner of cscp.evidence, through saved SPI statements.
 *
 * Rows are added in two ways only:
 *	- by the command trigger (command_fsm.c), one row for every transition
 *	  a command actually makes, whoever makes it;
 *	- by cscp._evidence_refusal, for a refused attempt (an invalid
 *	  transition, a "yes" that confirmed nothing): event type
 *	  invalid_transition_attempt, bound to a command the caller can see.
 * Both insert the row as the table's owner (cscp_evidence_append_chain,
 * cscp_evidence_append), so application roles need (and get) no INSERT,
 * UPDATE or DELETE privilege on it; the
 * evidence_guard trigger refuses UPDATE and TRUNCATE from anyone, and
 * DELETE of a row still inside its tenant's retention_evidence, unless its
 * conversation or subject was forgotten (cscp.forget_* writes the
 * tombstone first, then erases whole chains; forget.c).
 *
 * Each row's hash is the SHA-256 of the canonical JSON of its fields,
 * previous row's hash included; rows of one command form a chain numbered
 * by seq.  Rows without a command (an answer to no pending question) are
 * chains of one.  cscp.evidence_verify recomputes the chain.  The command
 * trigger appends after the head the command's row carries (the row of
 * its last transition, cscp.command.evidence_seq and evidence_hash)
 * without reading the chain; a refused attempt reads the chain's last row.
 * A write's rows go in one INSERT.
 *
 * A transition a direct UPDATE (or INSERT) attempts and a trigger refuses
 * raises, and its transaction's rows, evidence included, roll back: such a
 * refusal is recorded as one LOG line in the server log instead
 * (cscp_log_refused_step), which no rollback takes back, naming the role,
 * the tenant, the row and the refused step, as the operators' reads are
 * (inspect.c).
 *
 * evidence_id (and cscp.inspection_log's inspection_id) is cscp_row_id():
 * the microseconds since 2020 in its upper 51 bits and the writing
 * backend's slot in its lower 12, not a number from a sequence every
 * tenant shares, whose gaps would show a tenant how many rows the others
 * write.  It orders rows by the time they were written.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"
#include "pgcompat.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * Record in the server log that a direct write's step of a kind ("command"
 * or "context") row was refused: from state from (NULL: an insert) to to,
 * for reason why.  Called right before the trigger raises the refusal.
 */
void
cscp_log_refused_step(const char *kind, const char *tenant, const char *id,
					  const char *from, const char *to, const char *why)
{
	Oid			current = GetUserId();
	Oid			session = GetSessionUserId();

	ereport(LOG,
			(errmsg("cscp: refused %s step of role \"%s\"%s%s%s: tenant \"%s\", %s %s, from \"%s\" to \"%s\" (%s)",
					kind, GetUserNameFromId(current, false),
					session != current ? " (session role \"" : "",
					session != current ? GetUserNameFromId(session, false) : "",
					session != current ? "\")" : "",
					tenant ? tenant : "", kind, id ? id : "(new)",
					from ? from : "(insert)", to ? to : "", why ? why : "refused"),
			 errhidestmt(true)));
}

/* Append a nullable C string as JSON. */
static void
append_text(StringInfo out, const char *s)
{
	if (s == NULL)
		appendStringInfoString(out, "null");
	else
		cscp_canonical_string(out, s, strlen(s));
}

static void
append_jsonb(StringInfo out, Jsonb *j)
{
	if (j == NULL)
		appendStringInfoString(out, "null");
	else
		cscp_canonical_append(out, j);
}

/*
 * Append a command's context_ref as canonical JSON: the text of the last
 * one is kept (in TopMemoryContext) with its bytes, since every
 * transition of a command hashes the same context_ref again.  The
 * canonical text is a function of the jsonb's bytes alone, so equal bytes
 * give it back unchanged.
 */
static void
append_context_ref(StringInfo out, Jsonb *j)
{
	static char *last_raw = NULL;
	static Size last_rawlen = 0;
	static char *last_text = NULL;
	static int	last_textlen = 0;
	Size		rawlen;
	int			start;

	if (j == NULL)
	{
		appendStringInfoString(out, "null");
		return;
	}
	rawlen = VARSIZE(j);
	if (last_raw != NULL && rawlen == last_rawlen && memcmp(last_raw, j, rawlen) == 0)
	{
		appendBinaryStringInfo(out, last_text, last_textlen);
		return;
	}
	start = out->len;
	cscp_canonical_append(out, j);
	if (last_raw != NULL)
	{
		pfree(last_raw);
		pfree(last_text);
		last_raw = NULL;
	}
	last_text = MemoryContextAlloc(TopMemoryContext, out->len - start);
	memcpy(last_text, out->data + start, out->len - start);
	last_textlen = out->len - start;
	last_raw = MemoryContextAlloc(TopMemoryContext, rawlen);
	memcpy(last_raw, j, rawlen);
	last_rawlen = rawlen;
}

static void
append_text_array(StringInfo out, ArrayType *arr)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (arr == NULL)
	{
		appendStringInfoString(out, "null");
		return;
	}
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	appendStringInfoChar(out, '[');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		append_text(out, nulls[i] ? NULL : TextDatumGetCString(elems[i]));
	}
	appendStringInfoChar(out, ']');
}

/* Append a string literal (its length known at compile time). */
#define append_literal(out, lit) appendBinaryStringInfo((out), (lit), sizeof(lit) - 1)

/*
 * The hash of an evidence row: sha256 of the canonical JSON object of its
 * fields (keys in bytewise order, as canonical.c sorts them).
 */
char *
cscp_evidence_hash(const CscpEvidence *e)
{
	StringInfoData buf;

	initStringInfo(&buf);
	append_literal(&buf, "{\"command_id\":");
	append_text(&buf, e->command_id);
	append_literal(&buf, ",\"context_ref\":");
	append_context_ref(&buf, e->context_ref);
	append_literal(&buf, ",\"conversation_id\":");
	append_text(&buf, e->conversation_id);
	append_literal(&buf, ",\"created_at\":");
	append_text(&buf, cscp_utc_iso(e->created_at));
	append_literal(&buf, ",\"decision\":");
	append_text(&buf, e->decision);
	append_literal(&buf, ",\"detail\":");
	append_jsonb(&buf, e->detail);
	append_literal(&buf, ",\"event_type\":");
	append_text(&buf, e->event_type);
	append_literal(&buf, ",\"from_state\":");
	append_text(&buf, e->from_state);
	append_literal(&buf, ",\"message_ids\":");
	append_text_array(&buf, e->message_ids);
	append_literal(&buf, ",\"prev_hash\":");
	append_text(&buf, e->prev_hash);
	append_literal(&buf, ",\"reason_code\":");
	append_text(&buf, e->reason_code);
	append_literal(&buf, ",\"seq\":");
	enlargeStringInfo(&buf, 12);
	buf.len += pg_ltoa(e->seq, buf.data + buf.len);
	append_literal(&buf, ",\"stage\":");
	append_text(&buf, e->stage);
	append_literal(&buf, ",\"tenant_id\":");
	append_text(&buf, e->tenant_id);
	append_literal(&buf, ",\"to_state\":");
	append_text(&buf, e->to_state);
	appendStringInfoChar(&buf, '}');
	return cscp_sha256_hex(buf.data, buf.len);
}

/* 2020-01-01 00:00:00 UTC in PostgreSQL's microseconds since 2000. */
#define CSCP_ROW_ID_EPOCH INT64CONST(631152000000000)
#define CSCP_ROW_ID_SLOT_BITS 12

/*
 * A new id for a row of cscp.evidence or cscp.inspection_log: microseconds
 * since 2020 (enough for 71 years) shifted left by 12 bits, and the
 * backend's process slot modulo 4096 in the low bits.  Each backend
 * hands out increasing ids (a microsecond later than its last one, when
 * the clock has not moved or went back), so ids are unique while fewer
 * than 4096 backends run; with more, two backends whose slots agree
 * modulo 4096 would have to write in the same microsecond.
 */
int64
cscp_row_id(void)
{
	static int64 last = 0;
	int64		t = (int64) GetCurrentTimestamp() - CSCP_ROW_ID_EPOCH;

	if (t <= last)
		t = last + 1;
	last = t;
	return (t << CSCP_ROW_ID_SLOT_BITS) |
		((int64) cscp_my_proc_slot() & ((1 << CSCP_ROW_ID_SLOT_BITS) - 1));
}

PG_FUNCTION_INFO_V1(cscp_row_id_sql);

/* cscp._row_id() RETURNS bigint */
Datum
cscp_row_id_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(cscp_row_id());
}

/* The value of a lower case hex digit c (canonical_uuid has checked it). */
static inline int
hex_nibble(char c)
{
	return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* Whether s is a uuid as uuid_out writes it (36 characters, lower case). */
static bool
canonical_uuid(const char *s)
{
	if (s == NULL || strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' :
			!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/*
 * A command id as a uuid datum: uuid_out's form (what the command trigger
 * hands over) read directly, anything else through uuid_in, which accepts
 * and refuses what it always did.
 */
static Datum
command_uuid(const char *s)
{
	pg_uuid_t  *u;
	int			j = 0;

	if (!canonical_uuid(s))
		return DirectFunctionCall1(uuid_in, CStringGetDatum(s));
	u = palloc(sizeof(pg_uuid_t));
	for (int i = 0; i < 36; i += 2)
	{
		if (s[i] == '-')
			i++;
		u->data[j++] = (unsigned char) ((hex_nibble(s[i]) << 4) | hex_nibble(s[i + 1]));
	}
	Assert(j == UUID_LEN);
	return UUIDPGetDatum(u);
}

/* A nullable C string as a text datum, with its SPI null flag. */
static Datum
text_or_null(const char *s, char *nullflag)
{
	if (s == NULL)
	{
		*nullflag = 'n';
		return (Datum) 0;
	}
	*nullflag = ' ';
	return CStringGetTextDatum(s);
}

/* The most rows one cscp_evidence_append_chain call inserts (one INSERT). */
#define EVIDENCE_MAX_BATCH 4
#define EVIDENCE_NCOLS 17

/*
 * Insert events[0..n-1], numbered, linked and hashed already, in one
 * INSERT of n rows: a saved statement per n, run as the owner of
 * cscp.evidence (owner.c): application roles may read their tenant's
 * evidence but not write it.  The INSERT names its columns, so a column
 * added to the table takes its default; evidence_id is cscp_row_id(), the
 * column's default, given as a parameter (no function call for the
 * executor to set up per statement).  The table's triggers, rules,
 * constraints and the owner's privileges apply as to any INSERT.  With
 * optimistic, a row whose seq its chain holds already is skipped (ON
 * CONFLICT DO NOTHING on the chain's unique index) instead of refused.
 * Returns the rows inserted.  The caller is connected to SPI, as the owner.
 */
static uint64
evidence_insert(CscpEvidence *events, int n, bool optimistic)
{
	static SPIPlanPtr plans[2][EVIDENCE_MAX_BATCH];
	static const Oid row_types[EVIDENCE_NCOLS] = {TEXTOID, TEXTOID, UUIDOID, INT4OID, TEXTOID,
		TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID, JSONBOID, TEXTOID, TEXTOID, JSONBOID,
	TIMESTAMPTZOID, TEXTOID, TEXTOID, INT8OID};
	Oid			types[EVIDENCE_NCOLS * EVIDENCE_MAX_BATCH];
	Datum		values[EVIDENCE_NCOLS * EVIDENCE_MAX_BATCH];
	char		nulls[EVIDENCE_NCOLS * EVIDENCE_MAX_BATCH];

	Assert(n >= 1 && n <= EVIDENCE_MAX_BATCH);
	for (int i = 0; i < n; i++)
	{
		CscpEvidence *e = &events[i];
		Datum	   *v = values + i * EVIDENCE_NCOLS;
		char	   *nl = nulls + i * EVIDENCE_NCOLS;

		memcpy(types + i * EVIDENCE_NCOLS, row_types, sizeof(row_types));
		v[0] = text_or_null(e->tenant_id, &nl[0]);
		v[1] = text_or_null(e->conversation_id, &nl[1]);
		if (e->command_id != NULL)
		{
			v[2] = command_uuid(e->command_id);
			nl[2] = ' ';
		}
		else
		{
			v[2] = (Datum) 0;
			nl[2] = 'n';
		}
		v[3] = Int32GetDatum(e->seq);
		nl[3] = ' ';
		v[4] = text_or_null(e->stage, &nl[4]);
		v[5] = text_or_null(e->event_type, &nl[5]);
		v[6] = text_or_null(e->from_state, &nl[6]);
		v[7] = text_or_null(e->to_state, &nl[7]);
		v[8] = PointerGetDatum(e->message_ids);
		nl[8] = e->message_ids ? ' ' : 'n';
		v[9] = PointerGetDatum(e->context_ref);
		nl[9] = e->context_ref ? ' ' : 'n';
		v[10] = text_or_null(e->decision, &nl[10]);
		v[11] = text_or_null(e->reason_code, &nl[11]);
		v[12] = PointerGetDatum(e->detail);
		nl[12] = e->detail ? ' ' : 'n';
		v[13] = TimestampTzGetDatum(e->created_at);
		nl[13] = ' ';
		v[14] = text_or_null(e->prev_hash, &nl[14]);
		v[15] = text_or_null(e->hash, &nl[15]);
		v[16] = Int64GetDatum(cscp_row_id());
		nl[16] = ' ';
	}

	if (plans[optimistic][n - 1] == NULL)
	{
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfoString(&sql,
							   "INSERT INTO cscp.evidence (tenant_id, conversation_id, command_id, seq, stage,"
							   "    event_type, from_state, to_state, message_ids, context_ref, decision,"
							   "    reason_code, detail, created_at, prev_hash, hash, evidence_id) VALUES ");
		for (int i = 0; i < n; i++)
		{
			appendStringInfo(&sql, "%s(", i > 0 ? ", " : "");
			for (int c = 1; c <= EVIDENCE_NCOLS; c++)
				appendStringInfo(&sql, "%s$%d", c > 1 ? ", " : "", i * EVIDENCE_NCOLS + c);
			appendStringInfoChar(&sql, ')');
		}
		if (optimistic)
			appendStringInfoString(&sql, " ON CONFLICT (tenant_id, command_id, seq) DO NOTHING");
		cscp_spi_plan(&plans[optimistic][n - 1], sql.data, n * EVIDENCE_NCOLS, types);
		pfree(sql.data);
	}
	if (SPI_execute_plan(plans[optimistic][n - 1], values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not append evidence");
	/* a DBA's trigger or rule that skipped a row: 27000, never a gap */
	if (!optimistic && SPI_processed != (uint64) n)
		cscp_write_skipped("append evidence");
	return SPI_processed;
}

/* Number, link and hash events[0..n-1] after the chain's last row (seq, hash). */
static void
evidence_link(CscpEvidence *events, int n, int32 seq, const char *hash, MemoryContext cxt)
{
	for (int i = 0; i < n; i++)
	{
		events[i].seq = seq + 1 + i;
		events[i].prev_hash = i > 0 ? events[i - 1].hash :
			hash != NULL ? MemoryContextStrdup(cxt, hash) : NULL;
		events[i].hash = MemoryContextStrdup(cxt, cscp_evidence_hash(&events[i]));
	}
}

/*
 * The last row of command_id's chain, read from cscp.evidence: *seq (0:
 * none) and *hash (NULL: none), in cxt.  Not read-only: after a command
 * counter increment and with a fresh snapshot, so rows appended earlier in
 * the same statement are seen.  Read through the chain's unique index,
 * whatever the table's statistics say (cscp_spi_execute_keyed).  The
 * caller is connected to SPI.
 */
static void
evidence_head(const char *tenant_id, const char *command_id, int32 *seq, char **hash,
			  MemoryContext cxt)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, UUIDOID};
	Datum		args[2];

	args[0] = CStringGetTextDatum(tenant_id);
	args[1] = command_uuid(command_id);
	cscp_spi_plan(&plan,
				  "SELECT e.seq, e.hash FROM cscp.evidence e"
				  " WHERE e.tenant_id OPERATOR(pg_catalog.=) $1"
				  "   AND e.command_id OPERATOR(pg_catalog.=) $2"
				  " ORDER BY e.seq DESC LIMIT 1",
				  2, types);
	if (cscp_spi_execute_keyed(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the evidence chain of command %s", command_id);
	*seq = 0;
	*hash = NULL;
	if (SPI_processed == 1)
	{
		bool		isnull;
		char	   *h;

		*seq = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		h = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		*hash = h != NULL ? MemoryContextStrdup(cxt, h) : NULL;
	}
}

/*
 * Append events[0..n-1], the rows one write makes to one chain, in one
 * INSERT: numbered, linked and hashed after the chain's last row, which
 * fills in each event's seq, prev_hash and hash.
 *
 * With hint, the caller names the last row it believes the chain has
 * (hint_seq, hint_hash; 0 and NULL: none): the command trigger's, from the
 * row it is writing, which carries the head its last transition left
 * (cscp.command.evidence_seq, evidence_hash) and whose lock it holds, so
 * no transition appends meanwhile.  The rows go in after it without a
 * read; only when the chain has grown past the hint (a refused attempt,
 * which appends without writing the command, since) does the INSERT meet
 * the chain's unique index, skip, and the head is read and the rows
 * linked and inserted again.  Without hint, the head is read first.
 */
void
cscp_evidence_append_chain(CscpEvidence *events, int n, bool hint, int32 hint_seq,
						   const char *hint_hash)
{
	MemoryContext callerctx = CurrentMemoryContext;
	CscpOwnerScope owner;
	int32		seq = hint_seq;
	char	   *hash = hint_hash != NULL ? pstrdup(hint_hash) : NULL;
	uint64		done = 0;

	if (n < 1 || n > EVIDENCE_MAX_BATCH)
		elog(ERROR, "cannot append %d evidence rows in one statement", n);
	cscp_owner_enter("evidence", &owner);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (events[0].command_id == NULL)
	{
		/* A row of no command is a chain of one. */
		evidence_link(events, n, 0, NULL, callerctx);
		(void) evidence_insert(events, n, false);
	}
	else
	{
		if (hint)
		{
			evidence_link(events, n, seq, hash, callerctx);
			done = evidence_insert(events, n, true);
			if (done != 0 && done != (uint64) n)
				elog(ERROR, "the evidence chain of command %s has a gap after seq %d",
					 events[0].command_id, seq + 1);
		}
		if (done == 0)
		{
			evidence_head(events[0].tenant_id, events[0].command_id, &seq, &hash, callerctx);
			evidence_link(events, n, seq, hash, callerctx);
			(void) evidence_insert(events, n, false);
		}
	}
	SPI_finish();
	cscp_owner_leave(&owner);
}

/*
 * Append e, a row written without a write of its command (a refused
 * attempt, bound to a command or not): after the last row of its chain,
 * read from cscp.evidence (the caller holds the command's row lock, so
 * chains never fork, and the unique index on (tenant_id, command_id, seq)
 * would refuse a fork).  The command's row keeps the head of its last
 * transition; its next transition finds the chain grown past it.
 */
void
cscp_evidence_append(CscpEvidence *e)
{
	cscp_evidence_append_chain(e, 1, false, 0, NULL);
}

/* Field of a composite as a C string, or NULL. */
static char *
record_text(HeapTupleHeader rec, const char *name)
{
	bool		isnull;
	Datum		d = GetAttributeByName(rec, name, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

static Jsonb *
record_jsonb(HeapTupleHeader rec, const char *name)
{
	bool		isnull;
	Datum		d = GetAttributeByName(rec, name, &isnull);

	return isnull ? NULL : DatumGetJsonbP(d);
}

PG_FUNCTION_INFO_V1(cscp_evidence_hash_sql);

/* cscp.evidence_hash(e cscp.evidence) RETURNS text: the hash the row should have. */
Datum
cscp_evidence_hash_sql(PG_FUNCTION_ARGS)
{
	HeapTupleHeader rec = PG_GETARG_HEAPTUPLEHEADER(0);
	CscpEvidence e = {0};
	bool		isnull;
	Datum		d;

	e.tenant_id = record_text(rec, "tenant_id");
	e.conversation_id = record_text(rec, "conversation_id");
	d = GetAttributeByName(rec, "command_id", &isnull);
	e.command_id = isnull ? NULL : DatumGetCString(DirectFunctionCall1(uuid_out, d));
	d = GetAttributeByName(rec, "seq", &isnull);
	e.seq = isnull ? 0 : DatumGetInt32(d);
	e.stage = record_text(rec, "stage");
	e.event_type = record_text(rec, "event_type");
	e.from_state = record_text(rec, "from_state");
	e.to_state = record_text(rec, "to_state");
	d = GetAttributeByName(rec, "message_ids", &isnull);
	e.message_ids = isnull ? NULL : DatumGetArrayTypeP(d);
	e.context_ref = record_jsonb(rec, "context_ref");
	e.decision = record_text(rec, "decision");
	e.reason_code = record_text(rec, "reason_code");
	e.detail = record_jsonb(rec, "detail");
	d = GetAttributeByName(rec, "created_at", &isnull);
	if (isnull)
		PG_RETURN_NULL();
	e.created_at = DatumGetTimestampTz(d);
	e.prev_hash = record_text(rec, "prev_hash");
	PG_RETURN_TEXT_P(cstring_to_text(cscp_evidence_hash(&e)));
}

/*
 * Whether an evidence row belongs to what an erasure forgets (forget.c):
 * its conversation has a tombstone, or its subject has, the subject being
 * the actor of its command or, for a row without one, of the context its
 * context_ref names (what cscp.forget_subject deletes).  The erasure
 * writes its tombstone before its deletes, so they pass; anyone else's
 * delete of such a row is judged the same.
 */
static bool
evidence_forgotten(HeapTuple tuple, TupleDesc desc, const char *tenant)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, UUIDOID, UUIDOID};
	MemoryContext callerctx = CurrentMemoryContext;
	bool		isnull;
	Datum		args[3];
	char		nulls[3] = {' ', ' ', 'n'};
	char	   *subject = NULL;

	if (cscp_forgotten(tenant, "conversation",
					   SPI_getvalue(tuple, desc, SPI_fnumber(desc, "conversation_id"))))
		return true;

	args[0] = CStringGetTextDatum(tenant);
	args[1] = heap_getattr(tuple, SPI_fnumber(desc, "command_id"), desc, &isnull);
	if (isnull)
	{
		Datum		ref = heap_getattr(tuple, SPI_fnumber(desc, "context_ref"), desc, &isnull);
		char	   *id = isnull ? NULL :
			cscp_jsonb_get_cstring(DatumGetJsonbP(ref), "context_id");

		if (!canonical_uuid(id))
			return false;
		nulls[1] = 'n';
		args[2] = DirectFunctionCall1(uuid_in, CStringGetDatum(id));
		nulls[2] = ' ';
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT coalesce((SELECT c.actor_id FROM cscp.command c"
				  "                  WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.command_id OPERATOR(pg_catalog.=) $2),"
				  "                (SELECT x.actor_id FROM cscp.context x"
				  "                  WHERE x.tenant_id OPERATOR(pg_catalog.=) $1 AND x.context_id OPERATOR(pg_catalog.=) $3))",
				  3, types);
	if (SPI_execute_plan(plan, args, nulls, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the subject of an evidence row");
	if (SPI_processed == 1)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (s != NULL)
			subject = MemoryContextStrdup(callerctx, s);
	}
	SPI_finish();
	return subject != NULL && cscp_forgotten(tenant, "subject", subject);
}

PG_FUNCTION_INFO_V1(cscp_evidence_guard);

/*
 * Trigger cscp.evidence_guard(): BEFORE UPDATE OR DELETE FOR EACH ROW and
 * BEFORE TRUNCATE.  Evidence is never changed; a row is removed only once
 * its tenant's retention_evidence has passed (by cscp.sweep, or by an
 * owner tidying up by hand).
 */
Datum
cscp_evidence_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	cscp_tenancy_check_trigger(fcinfo);
	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("cscp.evidence_guard() must be a BEFORE trigger")));

	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) &&
		TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;
		TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
		bool		isnull;
		char	   *tenant = SPI_getvalue(tuple, desc, SPI_fnumber(desc, "tenant_id"));
		TimestampTz created = DatumGetTimestampTz(heap_getattr(tuple,
															   SPI_fnumber(desc, "created_at"),
															   desc, &isnull));
		Jsonb	   *policy;
		char	   *keep;
		Interval	retention;

		policy = cscp_policy_get(tenant);
		keep = cscp_jsonb_get_cstring(policy, "retention_evidence");
		if (keep != NULL && cscp_parse_interval(keep, &retention))
		{
			TimestampTz until = DatumGetTimestampTz(
													DirectFunctionCall2(timestamptz_pl_interval,
																		TimestampTzGetDatum(created),
																		IntervalPGetDatum(&retention)));

			if (until <= cscp_now())
				return PointerGetDatum(tuple);
		}
		/* cscp.forget_* erases whole chains, retention or not. */
		if (evidence_forgotten(tuple, desc, tenant))
			return PointerGetDatum(tuple);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("evidence is append-only"),
				 errdetail("This row of tenant \"%s\" is kept until its retention_evidence (%s) has passed.",
						   tenant, keep ? keep : "unset"),
				 errhint("cscp.sweep removes evidence once its retention has passed.")));
	}

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("evidence is append-only"),
			 errdetail("Rows of cscp.evidence are never updated or truncated."),
			 errhint("Record what happened next as a new transition instead.")));
	PG_RETURN_NULL();
}

/*
 * Record a refused attempt as invalid_transition_attempt: e's tenant,
 * conversation, to_state, reason, message ids, context_ref and detail are
 * the caller's.  The command, if any (command_id non-NULL), is looked up and
 * locked with the caller's rights, so row-level security keeps a caller to
 * its own tenant; its state at the time becomes from_state, whatever the
 * caller believes it to be.
 */
void
cscp_evidence_refuse(CscpEvidence *e, Datum command_id, bool has_command)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, UUIDOID};
	MemoryContext callerctx = CurrentMemoryContext;

	e->stage = e->to_state;
	e->event_type = "invalid_transition_attempt";
	e->decision = "refused";
	e->created_at = cscp_now();
	e->command_id = NULL;
	e->from_state = NULL;

	if (has_command)
	{
		Datum		args[2];
		char	   *conv;

		e->command_id = DatumGetCString(DirectFunctionCall1(uuid_out, command_id));
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		cscp_spi_plan(&plan,
					  "SELECT c.state::pg_catalog.text, c.conversation_id FROM cscp.command c"
					  " WHERE c.tenant_id OPERATOR(pg_catalog.=) $1 AND c.command_id OPERATOR(pg_catalog.=) $2 FOR UPDATE",
					  2, types);
		args[0] = CStringGetTextDatum(e->tenant_id);
		args[1] = command_id;
		if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up command %s", e->command_id);
		if (SPI_processed != 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command %s does not exist", e->command_id),
					 errhint("Check the id, and that cscp.tenant_id names the command's tenant.")));
		e->from_state = MemoryContextStrdup(callerctx,
											SPI_getvalue(SPI_tuptable->vals[0],
														 SPI_tuptable->tupdesc, 1));
		conv = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		if (strcmp(conv, e->conversation_id) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("command %s belongs to another conversation", e->command_id)));
		SPI_finish();
	}
	cscp_evidence_append(e);
}

PG_FUNCTION_INFO_V1(cscp_evidence_refusal);

/*
 * cscp._evidence_refusal(tenant_id text, conversation_id text, command_id uuid,
 *                        to_state text, reason_code text, message_ids text[],
 *                        context_ref jsonb, detail jsonb) RETURNS void:
 * cscp_evidence_refuse for SQL callers.
 */
Datum
cscp_evidence_refusal(PG_FUNCTION_ARGS)
{
	CscpEvidence e = {0};
	text	   *tenant = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *conversation = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);

	cscp_check_tenant(tenant);
	cscp_check_id("conversation_id", conversation);
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("to_state must not be null")));

	e.tenant_id = text_to_cstring(tenant);
	e.conversation_id = text_to_cstring(conversation);
	e.to_state = text_to_cstring(PG_GETARG_TEXT_PP(3));
	e.reason_code = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	e.message_ids = PG_ARGISNULL(5) ? NULL : PG_GETARG_ARRAYTYPE_P(5);
	e.context_ref = PG_ARGISNULL(6) ? NULL : PG_GETARG_JSONB_P(6);
	e.detail = PG_ARGISNULL(7) ? NULL : PG_GETARG_JSONB_P(7);
	cscp_evidence_refuse(&e, PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2), !PG_ARGISNULL(2));
	PG_RETURN_VOID();
}
