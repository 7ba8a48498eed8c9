/* reachclass.h - names of the reachability classes, shared by report and leaks */
#ifndef HT_REACHCLASS_H
#define HT_REACHCLASS_H

#include <stdint.h>

#include "json.h"
#include "replay.h"

/* JSON keys by enum htr_reach: "lost_bytes", "indirect_bytes", ... */
extern const char *const reach_class_json[4];
/* Text names by enum htr_reach: "definitely lost", ... */
extern const char *const reach_class_text[4];
/* Text order: the most serious class first. */
extern const int reach_class_order[4];

/* Leaked bytes of every site added up per class; returns bytes not scanned. */
uint64_t reach_class_totals(struct replay *r, uint64_t bytes[4]);

/* The four "*_bytes" keys of one split, into the open JSON object. */
void reach_class_json_fields(struct json *j, const uint64_t bytes[4]);

/* "definitely lost 1.2 KiB, indirectly lost 0 B, ..." on one line. */
void reach_class_print(const uint64_t bytes[4], uint64_t unscanned);

#endif
