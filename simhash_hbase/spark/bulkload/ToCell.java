package shdb.bulkload;

import org.apache.hadoop.hbase.KeyValue;
import org.apache.spark.api.python.Converter;

/**
 * A cell from Python, as PySpark unpickles it: the tuple
 * (row, family, qualifier, value, timestamp), bytes as byte[], into the
 * KeyValue HFileOutputFormat2 writes. (PySpark's own converters only make
 * Writables; an HFile takes Cells.)
 */
public final class ToCell implements Converter<Object, Object> {
  @Override
  public Object convert(Object obj) {
    Object[] t = (Object[]) obj;
    return new KeyValue(
        (byte[]) t[0], (byte[]) t[1], (byte[]) t[2],
        ((Number) t[4]).longValue(), KeyValue.Type.Put, (byte[]) t[3]);
  }
}
