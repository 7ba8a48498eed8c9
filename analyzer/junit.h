/* junit.h - writes JUnit XML reports (one suite per process, one case per check) */
#ifndef HT_JUNIT_H
#define HT_JUNIT_H

#include <stddef.h>

/*
 * The dialect of the Jenkins xUnit plugin's junit-10.xsd, which GitLab,
 * GitHub Actions report actions, Azure and CircleCI read too:
 *
 *   <testsuites name tests failures errors time>
 *     <testsuite name tests failures errors skipped time timestamp hostname id package>
 *       <properties><property name value/></properties>
 *       <testcase name classname time>
 *         <failure type message>details</failure> | <skipped message/>
 *       </testcase>
 *       <system-out>...</system-out>
 *     </testsuite>
 *   </testsuites>
 *
 * Text is escaped for XML 1.0: markup characters as entities, control
 * characters that XML cannot carry as '?', invalid UTF-8 as U+FFFD.
 */

struct junit;

/* NULL when out of memory. */
struct junit *junit_new(const char *name);
void junit_free(struct junit *j);

/* A suite; returns its index or -1 when out of memory.  'out' may be NULL. */
int junit_suite(struct junit *j, const char *name, const char *package,
		double seconds, const char *system_out);
/* A property of the suite (command line, dump path). */
void junit_property(struct junit *j, int suite, const char *name,
		    const char *value);
/* A case of the suite: passed unless failed or skipped below.  -1 on OOM. */
int junit_case(struct junit *j, int suite, const char *name,
	       const char *classname, double seconds);
void junit_fail(struct junit *j, int suite, int tcase, const char *type,
		const char *message, const char *details);
void junit_skip(struct junit *j, int suite, int tcase, const char *message);

/* Writes the report: 0, or -1 after printing "heaptrail: cannot write ...". */
int junit_write(const struct junit *j, const char *path);

#endif
