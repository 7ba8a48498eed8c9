/* gate_lsan.c - a program that carries LeakSanitizer suppressions of its own */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: the gate reads the program's own __lsan_default_suppressions()
 * (without running main) and applies it to this program's dump only: the
 * leak in suppressed_by_target is hidden, the one in visible_leak is not.
 *
 *   gate_lsan both     leaks in both functions
 *   gate_lsan target   leaks only in suppressed_by_target
 */

#define noinline __attribute__((noinline))

__attribute__((used, visibility("default")))
const char *__lsan_default_suppressions(void)
{
	return "# known leaks of this program\n"
	       "leak:suppressed_by_target\n";
}

static noinline void suppressed_by_target(void)
{
	truth_sink = T_MALLOC(2222);
}

static noinline void visible_leak(void)
{
	truth_sink = T_MALLOC(3333);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "both";

	suppressed_by_target();
	if (!strcmp(mode, "both"))
		visible_leak();
	truth_write();
	return 0;
}
