/* reachclass.c - names of the reachability classes, shared by report and leaks */
#include <stdio.h>

#include "cli.h"
#include "reachclass.h"

const char *const reach_class_json[4] = {
	[HTR_REACH_REACHABLE] = "reachable_bytes",
	[HTR_REACH_POSSIBLY] = "possibly_bytes",
	[HTR_REACH_INDIRECT] = "indirect_bytes",
	[HTR_REACH_LOST] = "lost_bytes",
};

const char *const reach_class_text[4] = {
	[HTR_REACH_REACHABLE] = "still reachable",
	[HTR_REACH_POSSIBLY] = "possibly lost",
	[HTR_REACH_INDIRECT] = "indirectly lost",
	[HTR_REACH_LOST] = "definitely lost",
};

const int reach_class_order[4] = {
	HTR_REACH_LOST, HTR_REACH_INDIRECT, HTR_REACH_POSSIBLY, HTR_REACH_REACHABLE,
};

uint64_t reach_class_totals(struct replay *r, uint64_t bytes[4])
{
	struct site_stats **sites;
	uint64_t live = 0, scanned = 0;
	size_t n, i;
	int c;

	for (c = 0; c < 4; c++)
		bytes[c] = 0;
	sites = replay_sites(r, &n);
	for (i = 0; i < n; i++) {
		live += sites[i]->live_bytes;
		for (c = 0; c < 4; c++) {
			bytes[c] += sites[i]->reach_bytes[c];
			scanned += sites[i]->reach_bytes[c];
		}
	}
	return live > scanned ? live - scanned : 0;
}

void reach_class_json_fields(struct json *j, const uint64_t bytes[4])
{
	int c;

	for (c = 0; c < 4; c++)
		json_kv_u64(j, reach_class_json[c], bytes[c]);
}

void reach_class_print(const uint64_t bytes[4], uint64_t unscanned)
{
	int k;

	for (k = 0; k < 4; k++) {
		int c = reach_class_order[k];

		printf("%s%s %s", k ? ", " : "", reach_class_text[c], cli_bytes(bytes[c]));
	}
	if (unscanned)
		printf(", not scanned %s", cli_bytes(unscanned));
	printf("\n");
}
