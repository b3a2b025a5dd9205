# flores.sh — sourced by the study and release scripts: where FLORES-200 dev
# is, as a file prefix (PREFIX.en and PREFIX.es), so every script looks in
# the same places in the same order.

# flores_prefix WHERE: WHERE/flores200-dev, or WHERE itself as a prefix;
# prints it, or returns 1 when neither has both files.
flores_prefix() {
  local where=$1 p
  for p in "$where/flores200-dev" "$where"; do
    if [ -f "$p.en" ] && [ -f "$p.es" ]; then echo "$p"; return 0; fi
  done
  return 1
}

# flores_auto REPO: the first of $PROJMT_FLORES, $PROJMT_DATA_DIR/flores200-dev,
# REPO/data/flores200-dev and REPO/../shared/data/flores200-dev that holds it;
# prints the prefix, or "none".
flores_auto() {
  local repo=$1 where found
  for where in ${PROJMT_FLORES:+"$PROJMT_FLORES"} ${PROJMT_DATA_DIR:+"$PROJMT_DATA_DIR/flores200-dev"} \
               "$repo/data/flores200-dev" "$repo/../shared/data/flores200-dev"; do
    if found=$(flores_prefix "$where"); then echo "$found"; return 0; fi
  done
  echo none
}
