%% Corpus workload (Erlang/OTP, JIT): binary trees, maps, binaries and
%% processes (each with its own heap).  Output is deterministic, and so,
%% nearly, is the peak resident memory: the 40 processes run one after
%% the other (spawn_wait; 11 runs peaked at 96.5-101.6 MiB), where 40 at
%% once peaked anywhere between 112 and 188 MiB from one run to the next,
%% by how many of them the schedulers ran together: a few per cent of
%% mmfold's did not show in that.
-module(churn).
-export([main/0]).

tree(0) -> {nil, nil};
tree(D) -> {tree(D - 1), tree(D - 1)}.
check({nil, _}) -> 1;
check({L, R}) -> 1 + check(L) + check(R).

-define(M, 1000000007).

main() ->
    io:format("emulator: ~p~n", [erlang:system_info(emu_flavor)]),
    LongLived = tree(16),
    H1 = lists:foldl(
           fun(D, H) ->
                   Total = lists:sum([check(tree(D)) || _ <- lists:seq(1, 1 bsl (16 - D + 2))]),
                   io:format("trees of depth ~b check ~b~n", [D, Total]),
                   (H * 31 + Total) rem ?M
           end, 0, lists:seq(4, 16, 2)),
    Parent = self(),
    Pids = [spawn_wait(fun() ->
                          M = maps:from_list([{integer_to_binary(K * I), lists:duplicate(K rem 7, K)}
                                              || K <- lists:seq(1, 20000)]),
                          N = maps:fold(fun(_, V, A) -> A + length(V) end, 0, M),
                          Parent ! {self(), maps:size(M) + N}
                  end) || I <- lists:seq(1, 40)],
    H2 = lists:foldl(fun(P, H) -> receive {P, X} -> (H * 31 + X) rem ?M end end, H1, Pids),
    B = iolist_to_binary([integer_to_list(I rem 97) || I <- lists:seq(1, 300000)]),
    H3 = (H2 * 31 + byte_size(B)) rem ?M,
    io:format("long lived ~b~n", [check(LongLived)]),
    io:format("hash ~b~n", [H3]).

%% Spawns F's process and waits for its answer, which it puts back at the
%% end of the mailbox for main/0 to take in order.
spawn_wait(F) ->
    P = spawn(F),
    receive {P, _} = M -> self() ! M end,
    P.
