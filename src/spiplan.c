/*-------------------------------------------------------------------------
 *
 * spiplan.c
 *	  Saved SPI plans for the queries cscp's C functions run on every call.
 *
 * Each query is prepared once per backend and kept (SPI_keepplan); the
 * plan cache replans it when a table it reads changes, so the only rule for
 * the SQL text is the usual one: every name schema-qualified, and types of
 * cscp's own named in the text (a cast) rather than passed as parameter
 * OIDs, which would not survive the extension being dropped and created
 * again in the same session.
 *
 *-------------------------------------------------------------------------
 */
#include "cscp.h"

/*
 * The saved plan in *plan, prepared from sql the first time.  The caller is
 * connected to SPI.
 */
SPIPlanPtr
cscp_spi_plan(SPIPlanPtr *plan, const char *sql, int nargs, const Oid *argtypes)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, (Oid *) argtypes);

		if (p == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(p);
		*plan = p;
	}
	return *plan;
}
