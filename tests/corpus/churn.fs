\ Corpus workload (Gforth): binary trees in ALLOCATEd cells, freed as
\ they go, and a string buffer grown with RESIZE.  Output is deterministic.
: tree ( d -- addr )
  dup 0= if drop 2 cells allocate throw dup 0 swap ! dup cell+ 0 swap ! exit then
  1- dup recurse swap recurse
  2 cells allocate throw tuck cell+ ! tuck ! ;
: check ( addr -- n )
  dup @ 0= if drop 1 exit then
  dup @ recurse swap cell+ @ recurse + 1+ ;
: kill ( addr -- )
  dup @ if dup @ recurse dup cell+ @ recurse then free throw ;
1000000007 constant m
variable h  0 h !
variable buf  variable len  variable cap
: mix ( n -- ) h @ 31 * + m mod h ! ;
: trees ( -- )
  16 tree
  17 4 do
    0  1 16 i - 2 + lshift 0 do  j tree dup check swap kill +  loop
    ." trees of depth " i . ." check " dup . cr  mix
  2 +loop
  ." long lived " dup check . cr  kill ;
: append ( a u -- )
  len @ over + cap @ > if cap @ 2* cap !  buf @ cap @ resize throw buf ! then
  tuck buf @ len @ + swap move len +! ;
: strings ( -- )
  16 dup cap ! allocate throw buf !  0 len !
  300000 0 do  i 97 mod 0 <# #s #> append  loop
  len @ mix  buf @ free throw ;
trees strings
." hash " h @ . cr
bye
