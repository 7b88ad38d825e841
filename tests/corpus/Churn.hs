-- Corpus workload (GHC): binary trees, Data.Map and string churn; the
-- copying collector does the rest.  Output is deterministic.
import qualified Data.Map.Strict as M
import Data.List (foldl')

data Tree = Leaf | Node Tree Tree

tree :: Int -> Tree
tree 0 = Node Leaf Leaf
tree d = Node (tree (d - 1)) (tree (d - 1))

check :: Tree -> Int
check (Node Leaf _) = 1
check (Node l r) = 1 + check l + check r
check Leaf = 0

m :: Int
m = 1000000007

main :: IO ()
main = do
  let longLived = tree 18
  h1 <- foldlM' 0 [4, 6 .. 18] $ \h d -> do
    let total = sum [check (tree d) | _ <- [1 .. (2 :: Int) ^ (18 - d + 2)]]
    putStrLn ("trees of depth " ++ show d ++ " check " ++ show total)
    return ((h * 31 + total) `mod` m)
  let maps = [M.fromList [(show (k * i), replicate (k `mod` 7) k) | k <- [0 .. 20000 - 1]] | i <- [0 .. 59 :: Int]]
      h2 = foldl' (\h mp -> (h * 31 + M.size mp + sum (map length (M.elems mp))) `mod` m) h1 maps
      s = concatMap (\i -> show (i `mod` 97)) [0 .. 300000 - 1 :: Int]
      h3 = (h2 * 31 + length s) `mod` m
  putStrLn ("long lived " ++ show (check longLived))
  putStrLn ("hash " ++ show h3)
  where
    foldlM' z xs f = go z xs where
      go a [] = return a
      go a (x:rest) = f a x >>= \a' -> a' `seq` go a' rest
