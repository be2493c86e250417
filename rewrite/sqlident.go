package rewrite

import "strings"

// googleSQLReserved are GoogleSQL's reserved keywords: a column named with
// one of them must be quoted in SQL.
var googleSQLReserved = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`ALL AND ANY ARRAY AS ASC ASSERT_ROWS_MODIFIED AT BETWEEN BY CASE CAST
		COLLATE CONTAINS CREATE CROSS CUBE CURRENT DEFAULT DEFINE DESC DISTINCT ELSE END ENUM
		ESCAPE EXCEPT EXCLUDE EXISTS EXTRACT FALSE FETCH FOLLOWING FOR FROM FULL GROUP GROUPING
		GROUPS HASH HAVING IF IGNORE IN INNER INTERSECT INTERVAL INTO IS JOIN LATERAL LEFT LIKE
		LIMIT LOOKUP MERGE NATURAL NEW NO NOT NULL NULLS OF ON OR ORDER OUTER OVER PARTITION
		PRECEDING PROTO QUALIFY RANGE RECURSIVE RESPECT RIGHT ROLLUP ROWS SELECT SET SOME STRUCT
		TABLESAMPLE THEN TO TREAT TRUE UNBOUNDED UNION UNNEST USING WHEN WHERE WINDOW WITH WITHIN`) {
		m[w] = true
	}
	return m
}()

// QuoteIdent renders a column or table name for GoogleSQL: as is when it
// is a plain identifier, in backquotes when it is a reserved keyword or
// holds other characters.
func QuoteIdent(name string) string {
	plain := name != "" && !googleSQLReserved[strings.ToUpper(name)]
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
		}
	}
	if plain {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "\\`") + "`"
}
