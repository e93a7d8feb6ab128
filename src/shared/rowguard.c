/*-------------------------------------------------------------------------
 *
 * rowguard.c
 *	  What the BEFORE ROW triggers guarding cscp's tables have in common:
 *	  the trigger protocol, column lookup by name, column rules, and
 *	  comparing a column across the old and new row.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "catalog/pg_type.h"
#include "utils/datum.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* Column number of name in desc, or an internal error naming table. */
int
cscp_column(TupleDesc desc, const char *table, const char *name)
{
	int			attnum = SPI_fnumber(desc, name);

	if (attnum <= 0)
		elog(ERROR, "%s has no column \"%s\"", table, name);
	return attnum;
}

/* The value of column name of row (of table, described by desc), with *isnull. */
Datum
cscp_column_value(HeapTuple row, TupleDesc desc, const char *table, const char *name, bool *isnull)
{
	return heap_getattr(row, cscp_column(desc, table, name), desc, isnull);
}

/*
 * The trigger data of a call of trigger function name, which must fire
 * BEFORE INSERT OR UPDATE FOR EACH ROW (else 39P01).
 */
TriggerData *
cscp_row_trigger(FunctionCallInfo fcinfo, const char *name)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be a BEFORE INSERT OR UPDATE ROW trigger", name)));
	return trigdata;
}

/* Look up the column numbers of cols in rel, unless they were looked up in rel already. */
void
cscp_columns_load(CscpColumns *cols, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	Assert(cols->n <= CSCP_MAX_COLUMNS);
	if (cols->relid == RelationGetRelid(rel))
		return;
	for (int i = 0; i < cols->n; i++)
		cols->attnum[i] = cscp_column(desc, cols->table, cols->names[i]);
	cols->relid = RelationGetRelid(rel);
}

/* Start an edit of a row of desc that sets no column yet. */
void
cscp_row_edit_init(CscpRowEdit *edit, TupleDesc desc)
{
	edit->desc = desc;
	edit->values = palloc0(desc->natts * sizeof(Datum));
	edit->nulls = palloc0(desc->natts * sizeof(bool));
	edit->repl = palloc0(desc->natts * sizeof(bool));
}

/* Set column attnum to value (or to NULL) in the edit. */
void
cscp_row_edit_set(CscpRowEdit *edit, int attnum, Datum value, bool isnull)
{
	edit->values[attnum - 1] = value;
	edit->nulls[attnum - 1] = isnull;
	edit->repl[attnum - 1] = true;
}

/* tuple with the edit's columns set, as a new tuple. */
HeapTuple
cscp_row_edit_apply(CscpRowEdit *edit, HeapTuple tuple)
{
	return heap_modify_tuple(tuple, edit->desc, edit->values, edit->nulls, edit->repl);
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

/* Whether column attnum of tuple is true (NULL: false). */
bool
cscp_column_true(HeapTuple tuple, TupleDesc desc, int attnum)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	return !isnull && DatumGetBool(d);
}

/*
 * The first of cols (looked up in rel) whose value differs between the
 * rows a and b of rel, as an index into cols->names; -1 when none does.
 */
int
cscp_first_changed(Relation rel, CscpColumns *cols, HeapTuple a, HeapTuple b)
{
	cscp_columns_load(cols, rel);
	for (int i = 0; i < cols->n; i++)
		if (!cscp_same_value(a, b, RelationGetDescr(rel), cols->attnum[i]))
			return i;
	return -1;
}

/* Whether an UPDATE's SET list names column attnum. */
bool
cscp_column_updated(const Bitmapset *updatedcols, int attnum)
{
	return bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, updatedcols);
}

/* Raise check_violation: column attnum of rel breaks its rule. */
static void
rule_broken(Relation rel, int attnum, const char *table, const char *column,
			const char *what, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("column \"%s\" of %s %s", column, table, what),
			 detail ? errdetail_internal("%s", detail) : 0,
			 errtablecol(rel, attnum)));
}

/* Whether the text datum d is one of the NULL-terminated values. */
static bool
one_of(Datum d, const char *const *values)
{
	text	   *t = DatumGetTextPP(d);
	int			len = VARSIZE_ANY_EXHDR(t);

	for (; *values != NULL; values++)
		if ((int) strlen(*values) == len && memcmp(VARDATA_ANY(t), *values, len) == 0)
			return true;
	return false;
}

/* "'a', 'b' or 'c'" */
static char *
values_list(const char *const *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; values[i] != NULL; i++)
		appendStringInfo(&buf, "%s\"%s\"", i == 0 ? "" : values[i + 1] ? ", " : " or ",
						 values[i]);
	return buf.data;
}

/*
 * Hold tuple, a row of rel, to rules (see cscp.h), raising check_violation
 * (23514) at the first rule it breaks.
 */
void
cscp_row_check(Relation rel, HeapTuple tuple, CscpRowRules *rules)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *values;
	bool	   *nulls;

	if (rules->relid != RelationGetRelid(rel))
	{
		for (int i = 0; i < rules->n; i++)
		{
			rules->attnum[i] = cscp_column(desc, rules->table, rules->rule[i].column);
			if (rules->rule[i].rule == CSCP_RULE_NULL_WITH)
				rules->other_attnum[i] = cscp_column(desc, rules->table, rules->rule[i].other);
		}
		rules->relid = RelationGetRelid(rel);
	}

	/* one pass over the tuple: heap_getattr would walk it once per rule */
	values = palloc(desc->natts * sizeof(Datum));
	nulls = palloc(desc->natts * sizeof(bool));
	heap_deform_tuple(tuple, desc, values, nulls);

	for (int i = 0; i < rules->n; i++)
	{
		const char *column = rules->rule[i].column;
		int			attnum = rules->attnum[i];
		Oid			type = TupleDescAttr(desc, attnum - 1)->atttypid;
		bool		isnull = nulls[attnum - 1];
		Datum		d = values[attnum - 1];

		if (rules->rule[i].rule == CSCP_RULE_NULL_WITH)
		{
			bool		other_null = nulls[rules->other_attnum[i] - 1];

			if (isnull != other_null)
				rule_broken(rel, attnum, rules->table, column,
							psprintf("must be null exactly when column \"%s\" is null",
									 rules->rule[i].other), NULL);
			continue;
		}
		if (isnull)
			continue;
		switch (rules->rule[i].rule)
		{
			case CSCP_RULE_NOT_EMPTY:
				if (VARSIZE_ANY_EXHDR(DatumGetPointer(d)) == 0)
					rule_broken(rel, attnum, rules->table, column, "must not be empty", NULL);
				break;
			case CSCP_RULE_TENANT:
				if (VARSIZE_ANY_EXHDR(DatumGetPointer(d)) == 0 ||
					(VARSIZE_ANY_EXHDR(DatumGetPointer(d)) == 1 &&
					 *VARDATA_ANY(DatumGetPointer(d)) == '*'))
					rule_broken(rel, attnum, rules->table, column, "must name a tenant",
								"It is empty, or \"*\", which holds the policy defaults.");
				break;
			case CSCP_RULE_POSITIVE:
			case CSCP_RULE_NOT_NEGATIVE:
				{
					int			sign;

					if (type == INT4OID)
						sign = DatumGetInt32(d) > 0 ? 1 : DatumGetInt32(d) < 0 ? -1 : 0;
					else if (type == INT8OID)
						sign = DatumGetInt64(d) > 0 ? 1 : DatumGetInt64(d) < 0 ? -1 : 0;
					else if (type == INTERVALOID)
					{
						Interval   *zero = palloc0(sizeof(Interval));

						sign = DatumGetInt32(DirectFunctionCall2(interval_cmp, d,
																 IntervalPGetDatum(zero)));
					}
					else
						elog(ERROR, "%s.%s: no sign rule for type %u", rules->table, column, type);
					if (rules->rule[i].rule == CSCP_RULE_POSITIVE && sign <= 0)
						rule_broken(rel, attnum, rules->table, column, "must be positive", NULL);
					if (rules->rule[i].rule == CSCP_RULE_NOT_NEGATIVE && sign < 0)
						rule_broken(rel, attnum, rules->table, column, "must not be negative", NULL);
				}
				break;
			case CSCP_RULE_JSON_OBJECT:
				if (!JB_ROOT_IS_OBJECT(DatumGetJsonbP(d)))
					rule_broken(rel, attnum, rules->table, column, "must be a JSON object", NULL);
				break;
			case CSCP_RULE_ONE_OF:
				if (!one_of(d, rules->rule[i].values))
					rule_broken(rel, attnum, rules->table, column,
								psprintf("must be %s", values_list(rules->rule[i].values)), NULL);
				break;
			case CSCP_RULE_NULL_WITH:
				break;
		}
	}
}

/*
 * Run a BEFORE INSERT OR UPDATE FOR EACH ROW trigger: check the protocol,
 * then hand the row to guard->insert or guard->update with cscp.now(), and
 * hold the row it returns to guard->rules.
 */
Datum
cscp_row_guard(FunctionCallInfo fcinfo, const CscpRowGuard *guard)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TimestampTz now;
	HeapTuple	row = NULL;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be a BEFORE ROW trigger", guard->name)));

	if (guard->columns != NULL)
		cscp_columns_load(guard->columns, trigdata->tg_relation);
	else if (guard->load_columns != NULL)
		guard->load_columns(trigdata->tg_relation);
	now = cscp_now();

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		row = guard->insert(trigdata->tg_relation, trigdata->tg_trigtuple, now);
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		row = guard->update(trigdata->tg_relation, trigdata->tg_trigtuple,
							trigdata->tg_newtuple, trigdata->tg_updatedcols, now);
	else
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s fires on INSERT or UPDATE only", guard->name)));
	if (row != NULL && guard->rules != NULL)
		cscp_row_check(trigdata->tg_relation, row, guard->rules);
	return PointerGetDatum(row);
}
