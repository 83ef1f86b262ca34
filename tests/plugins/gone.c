/* A library the NEEDS_MISSING plugin links against, then kept out of its search path. */
int distc_test_gone_value(void);
int distc_test_gone_value(void) { return 42; }
