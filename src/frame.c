/*-------------------------------------------------------------------------
 *
 * frame.c
 *	  The guard of cscp.frame, the snapshot-on-execute record of the
 *	  context state a command was formed from.
 *
 * Invariants kept here, whoever writes (the API, an application role by
 * direct SQL, the owner):
 *	- a frame is append-only: an UPDATE is refused (DELETE is for the sweep
 *	  and erasure, which only the owner may run);
 *	- a new frame is its context's state as command_submit records it: the
 *	  context it names is of its tenant and conversation, usable (live and
 *	  not past expires_at), and its state equals what command_submit
 *	  computes from that context and the frame's message ids
 *	  (cscp._frame_state); context_hash is generated from the state.
 * So a frame can be written by anyone who may form a command in the
 * conversation, but never one that says something else than the context
 * said at that moment: a forged frame is refused rather than kept from the
 * application role by privileges, which would make command_submit write
 * frames with the owner's rights and leave a DBA's row-level policies on
 * cscp.frame unapplied to it.
 *
 * The context is read by a saved statement with the caller's rights (its
 * row-level security applies); command_submit has it locked already.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

/* cscp._frame_state (command_api.c): the state command_submit records. */
extern Datum cscp_frame_state(PG_FUNCTION_ARGS);

/* Column numbers of cscp.frame, looked up by name once per relation. */
static struct
{
	Oid			relid;
	int			tenant_id,
				conversation_id,
				context_id,
				state;
}			frame_cols = {InvalidOid};

static void
frame_load_columns(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (frame_cols.relid == RelationGetRelid(rel))
		return;
	frame_cols.tenant_id = cscp_column(desc, "cscp.frame", "tenant_id");
	frame_cols.conversation_id = cscp_column(desc, "cscp.frame", "conversation_id");
	frame_cols.context_id = cscp_column(desc, "cscp.frame", "context_id");
	frame_cols.state = cscp_column(desc, "cscp.frame", "state");
	frame_cols.relid = RelationGetRelid(rel);
}

/* A new frame: its context's state as command_submit records it, or 55000. */
static HeapTuple
frame_insert(Relation rel, HeapTuple tuple, TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[4] = {TEXTOID, UUIDOID, TEXTOID, JSONBOID};
	TupleDesc	desc = RelationGetDescr(rel);
	Datum		args[4];
	char		nulls[4];
	const char *problem = NULL;
	bool		isnull;

	args[0] = heap_getattr(tuple, frame_cols.tenant_id, desc, &isnull);
	nulls[0] = isnull ? 'n' : ' ';
	args[1] = heap_getattr(tuple, frame_cols.context_id, desc, &isnull);
	nulls[1] = isnull ? 'n' : ' ';
	args[2] = heap_getattr(tuple, frame_cols.conversation_id, desc, &isnull);
	nulls[2] = isnull ? 'n' : ' ';
	args[3] = heap_getattr(tuple, frame_cols.state, desc, &isnull);
	nulls[3] = isnull ? 'n' : ' ';
	if (nulls[0] == 'n' || nulls[1] == 'n' || nulls[2] == 'n' || nulls[3] == 'n')
		return tuple;			/* the NOT NULL constraints refuse it */

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	cscp_spi_plan(&plan,
				  "SELECT CASE WHEN c.conversation_id <> $3"
				  "            THEN 'its context is of another conversation'"
				  "            WHEN c.status NOT IN ('active', 'pending', 'blocked')"
				  "                 OR c.expires_at <= cscp.now()"
				  "            THEN 'its context is expired or closed'"
				  "            WHEN jsonb_typeof($4->'message_ids') IS DISTINCT FROM 'array'"
				  "            THEN 'its state has no message ids' END,"
				  "       c,"
				  "       ARRAY(SELECT jsonb_array_elements_text($4->'message_ids'))"
				  "  FROM cscp.context c WHERE c.tenant_id = $1 AND c.context_id = $2",
				  4, types);
	if (SPI_execute_plan(plan, args, nulls, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up the context of a frame");
	if (SPI_processed == 0)
		problem = "its context does not exist";
	else
	{
		HeapTuple	r = SPI_tuptable->vals[0];
		TupleDesc	rdesc = SPI_tuptable->tupdesc;
		char	   *p = SPI_getvalue(r, rdesc, 1);

		if (p != NULL)
			problem = pstrdup(p);
		else
		{
			Datum		ctx = SPI_getbinval(r, rdesc, 2, &isnull);
			Datum		ids = SPI_getbinval(r, rdesc, 3, &isnull);
			Datum		state = DirectFunctionCall2(cscp_frame_state, ctx, ids);

			if (!DatumGetBool(DirectFunctionCall2(jsonb_eq, state, args[3])))
				problem = "its state is not the context's";
		}
	}
	SPI_finish();
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a frame must record its context's state as it is"),
				 errdetail("The frame names context %s of tenant \"%s\", but %s.",
						   SPI_getvalue(tuple, desc, frame_cols.context_id),
						   SPI_getvalue(tuple, desc, frame_cols.tenant_id), problem),
				 errhint("Frames are written by cscp.command_submit; form commands with it.")));
	return tuple;
}

/* Frames never change. */
static HeapTuple
frame_update(Relation rel, HeapTuple oldtup, HeapTuple newtup, const Bitmapset *updatedcols,
			 TimestampTz now)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("frames cannot be changed"),
			 errdetail("A frame records the context state a command was formed from; it is append-only."),
			 errhint("Form a new command with cscp.command_submit.")));
	return NULL;				/* not reached */
}

static const CscpRowGuard frame_guard = {
	.name = "cscp.frame_guard()",
	.load_columns = frame_load_columns,
	.insert = frame_insert,
	.update = frame_update,
};

PG_FUNCTION_INFO_V1(cscp_frame_guard);

/* Trigger cscp.frame_guard(): BEFORE INSERT OR UPDATE FOR EACH ROW. */
Datum
cscp_frame_guard(PG_FUNCTION_ARGS)
{
	cscp_tenancy_check_trigger(fcinfo);
	return cscp_row_guard(fcinfo, &frame_guard);
}
