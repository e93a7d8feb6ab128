/*-------------------------------------------------------------------------
 *
 * rowguard.c
 *	  What the BEFORE ROW triggers guarding cscp's tables (context_fsm.c,
 *	  command_fsm.c) have in common: the trigger protocol, column lookup by
 *	  name, and comparing a column across the old and new row.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/datum.h"

/* Column number of name in desc, or an internal error naming table. */
int
cscp_column(TupleDesc desc, const char *table, const char *name)
{
	int			attnum = SPI_fnumber(desc, name);

	if (attnum <= 0)
		elog(ERROR, "%s has no column \"%s\"", table, name);
	return attnum;
}

/* Whether column attnum holds the same value in both tuples. */
bool
cscp_same_value(HeapTuple a, HeapTuple b, TupleDesc desc, int attnum)
{
	Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
	bool		anull,
				bnull;
	Datum		ad = heap_getattr(a, attnum, desc, &anull);
	Datum		bd = heap_getattr(b, attnum, desc, &bnull);

	if (anull || bnull)
		return anull == bnull;
	return datum_image_eq(ad, bd, att->attbyval, att->attlen);
}

/* Whether an UPDATE's SET list names column attnum. */
bool
cscp_column_updated(const Bitmapset *updatedcols, int attnum)
{
	return bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, updatedcols);
}

/*
 * Run a BEFORE INSERT OR UPDATE FOR EACH ROW trigger: check the protocol,
 * then hand the row to guard->insert or guard->update with cscp.now().
 */
Datum
cscp_row_guard(FunctionCallInfo fcinfo, const CscpRowGuard *guard)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TimestampTz now;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be a BEFORE ROW trigger", guard->name)));

	guard->load_columns(trigdata->tg_relation);
	now = cscp_now();

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		return PointerGetDatum(guard->insert(trigdata->tg_relation,
											 trigdata->tg_trigtuple, now));
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return PointerGetDatum(guard->update(trigdata->tg_relation,
											 trigdata->tg_trigtuple,
											 trigdata->tg_newtuple,
											 trigdata->tg_updatedcols, now));
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("%s fires on INSERT or UPDATE only", guard->name)));
	return (Datum) 0;
}
