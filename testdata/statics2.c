/* statics2: the other half of statics.c, with its own static helper. */
static int helper(const char *s, double d) { return s[0] + (int)(d * 2); }

int other(const char *s, double d) { return helper(s, d); }
