/* An empty library: something else already in LD_PRELOAD. */
int mmfold_test_other_preload;
