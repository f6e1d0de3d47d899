/*
 * check.h: the unit tests' only assertion, which never stops the run and
 * always says what it expected and what it saw. Arguments are evaluated
 * once; never pass an expression with side effects.
 */
#ifndef VNETLAB_CHECK_H
#define VNETLAB_CHECK_H

#include <stdarg.h>
#include <stdio.h>

extern int check_failed, check_total;

#define CHECK_EQ(expected, seen, what)                                                             \
	do {                                                                                       \
		long long e_ = (long long)(expected), s_ = (long long)(seen);                      \
		check_total++;                                                                     \
		if (e_ != s_) {                                                                    \
			check_failed++;                                                            \
			printf("FAIL %s:%d: %s: expected %lld, saw %lld\n", __FILE__, __LINE__,    \
			       (what), e_, s_);                                                    \
		}                                                                                  \
	} while (0)

#define CHECK(cond, what) CHECK_EQ(1, !!(cond), what)

/* Run one test function and print its verdict. */
#define RUN(fn)                                                                                    \
	do {                                                                                       \
		int before_ = check_failed;                                                        \
		fn();                                                                              \
		printf("%s %s\n", check_failed == before_ ? "ok  " : "FAIL", #fn);                 \
	} while (0)

/* main()'s last line, "NAME: N checks, N failed" (tests/unit/run.sh reads
 * it; NAME from a printf format), and its exit status. */
static inline int check_done(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int check_done(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(": %d checks, %d failed\n", check_total, check_failed);
	return check_failed ? 1 : 0;
}

#endif
